-- id: integrity.conflicting_duplicate
-- severity: high
-- family: integrity
-- dialect: any
-- summary: one event id seen with two different contents
-- spec: docs/protocol.md §3 (redelivery), §9.2 (identity)
-- rows: versions
-- explain:
--   `id` is globally unique. The same id with identical content (the same
--   JSON value, whatever the key order or white space) is a redelivery and
--   never a finding. The same id with different content is a collision:
--   fires once for each later distinct content, paired with the first
--   occurrence, which is the version every other rule sees. The message
--   names the envelope fields that differ (payload counts as one field and
--   is compared as written, so a reordered payload also shows as differing).
--   Example: evt_7 as task.progress at line 3 and evt_7 as task.completed at
--   line 9 fires on line 9; the exact line 3 repeated is silent.
WITH firsts AS (
    SELECT * FROM events WHERE version = 1
),
later AS (
    SELECT * FROM events WHERE version > 1
)
SELECT coalesce(f.task_id, l.task_id) AS task_id,
       concat('event id ', l.id, ' at ', l.src_file, ':', CAST(l.src_line AS VARCHAR),
              ' (', l.type, ', ', instant_text(l.created_at),
              ') has different content from its first occurrence at ',
              f.src_file, ':', CAST(f.src_line AS VARCHAR),
              ' (', f.type, ', ', instant_text(f.created_at), '); differing: ',
              coalesce(nullif(concat_ws(', ',
                  CASE WHEN l.type <> f.type THEN 'type' END,
                  CASE WHEN l.source <> f.source THEN 'source' END,
                  CASE WHEN l.created_us <> f.created_us THEN 'created_at' END,
                  CASE WHEN l.task_id IS DISTINCT FROM f.task_id THEN 'task_id' END,
                  CASE WHEN l.parent_task_id IS DISTINCT FROM f.parent_task_id THEN 'parent_task_id' END,
                  CASE WHEN l.causation_id IS DISTINCT FROM f.causation_id THEN 'causation_id' END,
                  CASE WHEN l.correlation_id IS DISTINCT FROM f.correlation_id THEN 'correlation_id' END,
                  CASE WHEN l.target IS DISTINCT FROM f.target THEN 'target' END,
                  CASE WHEN (l.spec_version IS DISTINCT FROM f.spec_version)
                         OR (l.aep_version IS DISTINCT FROM f.aep_version) THEN 'version field' END,
                  CASE WHEN l.payload IS DISTINCT FROM f.payload THEN 'payload' END), ''),
                  'other fields'),
              '; ids must be unique: the first occurrence is audited, this one is ignored by the other rules') AS message,
       make_array(l.seq, f.seq) AS seqs
FROM later l
JOIN firsts f ON f.id = l.id
