-- id: envelope.invalid
-- severity: medium
-- family: envelope
-- dialect: any
-- summary: a line that is not a valid event envelope (not JSON, missing or mis-typed field, bad timestamp)
-- spec: docs/protocol.md §2 (envelope)
-- explain:
--   Every input line (or Parquet row) that the ingest rejected: not JSON,
--   not an object, a required envelope field missing or empty (the version
--   field spec_version / aep_version, id, type, source, created_at, the
--   payload key), a field of the wrong type, a type not of the form
--   family.name, or a created_at that is not RFC 3339. The rest of the
--   input is still audited; the rejected line takes part in no other rule.
--   One finding per line, with file, line and the reason.
--   Example: {"id":"evt_2","type":"task.progress","source":"a",
--   "created_at":"2026-07-10T10:00:00Z","payload":{}} has no version field
--   and fires.
SELECT CAST(NULL AS VARCHAR) AS task_id,
       concat(b.src_file, ':', CAST(b.src_line AS VARCHAR), ': ', b.reason,
              CASE WHEN b.id IS NULL THEN '' ELSE concat(' (event id ', log_value(b.id),
                   CASE WHEN b.type IS NULL THEN '' ELSE concat(', type ', log_value(b.type)) END, ')') END,
              '; the line was skipped, fix the producer so it emits a valid envelope') AS message,
       make_array(b.seq) AS seqs
FROM bad_lines b
