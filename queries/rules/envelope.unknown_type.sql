-- id: envelope.unknown_type
-- severity: medium
-- family: envelope
-- dialect: any
-- summary: event type not in the registry (0.2 events medium, 0.1 events info)
-- spec: docs/protocol.md §2 (envelope)
-- explain:
--   Harmovela 0.2 says unknown event types MUST be rejected: a 0.2 event
--   (spec_version) whose type is not one of the 107 registered types fires
--   at medium. An AEP 0.1 event (aep_version) is checked against the 84-type
--   0.1 registry (the same list without the adaptation, command, query and
--   state families) and fires at info only, since 0.1 forwarded unknown
--   types. The event's own version field decides (its dialect as ingested:
--   aep_version, or a spec_version starting with 0.1, is 0.1), not the
--   task's dialect or --spec (which select the runtime semantics, not the
--   envelope registry).
--   Example: {"spec_version":"0.2","type":"com.example.custom.event",...}
--   fires (medium); {"aep_version":"0.1","type":"command.requested",...}
--   fires (info: command.* arrived with 0.2); task.progress is silent.
SELECT e.task_id,
       concat('event ', log_value(e.id), ' at ', instant_text(e.created_at),
              ' has type ''', log_value(e.type), ''', ',
              CASE WHEN e.dialect = '0.1' AND k.type IS NOT NULL
                   THEN 'which is a Harmovela 0.2 type but not in the 84-type AEP 0.1 registry ('
                   WHEN e.dialect = '0.1'
                   THEN 'which is not in the 84-type AEP 0.1 registry ('
                   ELSE 'which is not in the 107-type Harmovela 0.2 registry ('
              END,
              CASE WHEN e.spec_version IS NOT NULL
                   THEN concat('spec_version ', log_value(e.spec_version))
                   ELSE concat('aep_version ', log_value(e.aep_version)) END, ')',
              CASE WHEN e.dialect = '0.1'
                   THEN '; expected a registered type (0.1 consumers forward unknown types, so this is informational)'
                   ELSE '; expected a registered type (0.2 consumers MUST reject unknown types)'
              END) AS message,
       make_array(e.seq) AS seqs,
       CASE WHEN e.dialect = '0.1' THEN 'info' ELSE 'medium' END AS severity
FROM ev e
LEFT JOIN known_types k ON k.type = e.type
WHERE k.type IS NULL OR (e.dialect = '0.1' AND NOT k.in_01)
