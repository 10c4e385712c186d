-- id: envelope.unsupported_version
-- severity: medium
-- family: envelope
-- dialect: any
-- summary: spec_version other than 0.2 or aep_version other than 0.1
-- spec: docs/protocol.md §1 (versions)
-- explain:
--   The tool knows Harmovela spec_version "0.2" and AEP aep_version "0.1".
--   Fires once per event whose spec_version is present and not exactly "0.2",
--   or whose aep_version is present and not exactly "0.1" (both are named
--   when both are wrong). The event is still audited under the dialect its
--   field implies (spec_version: 0.2, aep_version: 0.1). A 0.2 event that
--   also carries aep_version "0.1" is envelope.legacy_version_field, not this.
--   Example: {"spec_version":"9.9","type":"task.progress",...} fires;
--   "0.2" is silent.
SELECT e.task_id,
       concat(log_value(e.type), ' ', log_value(e.id), ' at ', instant_text(e.created_at),
              ' declares ',
              concat_ws(' and ',
                  CASE WHEN e.spec_version IS NOT NULL AND e.spec_version <> '0.2'
                       THEN concat('spec_version "', log_value(e.spec_version), '"') END,
                  CASE WHEN e.aep_version IS NOT NULL AND e.aep_version <> '0.1'
                       THEN concat('aep_version "', log_value(e.aep_version), '"') END),
              ', a version this tool does not know; expected spec_version "0.2" (Harmovela) or aep_version "0.1" (AEP)',
              '; audited as ', e.dialect) AS message,
       make_array(e.seq) AS seqs
FROM ev e
WHERE (e.spec_version IS NOT NULL AND e.spec_version <> '0.2')
   OR (e.aep_version IS NOT NULL AND e.aep_version <> '0.1')
