-- id: envelope.legacy_version_field
-- severity: low
-- family: envelope
-- dialect: 0.2
-- summary: a Harmovela 0.2 event that also carries the legacy aep_version field
-- spec: docs/protocol.md §1 (versions)
-- explain:
--   Harmovela 0.2 replaced aep_version with spec_version and says to reject
--   the legacy field. Fires for every event that carries spec_version (any
--   value) together with aep_version (any value). Such an event is audited
--   as 0.2.
--   Example: {"spec_version":"0.2","aep_version":"0.1",...} fires;
--   {"spec_version":"0.2",...} and {"aep_version":"0.1",...} are silent.
SELECT e.task_id,
       concat(log_value(e.type), ' ', log_value(e.id), ' at ', instant_text(e.created_at),
              ' carries spec_version "', log_value(e.spec_version), '" and also the legacy aep_version "',
              log_value(e.aep_version), '"; expected spec_version alone (0.2 rejects aep_version)') AS message,
       make_array(e.seq) AS seqs
FROM ev e
WHERE e.spec_version IS NOT NULL AND e.aep_version IS NOT NULL
