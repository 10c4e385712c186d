-- id: integrity.conflicting_duplicate
-- severity: high
-- family: integrity
-- dialect: any
-- summary: one event id seen with two or more different contents
-- spec: docs/protocol.md §3 (redelivery), §9.2 (identity)
-- rows: versions
-- explain:
--   `id` is globally unique. The same id with identical content (the same
--   JSON value: member order, white space and string escapes do not
--   matter, numbers compare by exact decimal value) is a redelivery and
--   never a finding. The same id with other content fires once, whatever
--   its number of versions, citing every version: version 1 (the earliest
--   by created_at, then input order) is the one the other rules read, and
--   each later one is read in a reading of its own, whose findings the
--   report adds, marked as resting on a conflicting copy. The message names
--   the first two versions and the envelope fields that differ among all
--   of them (payload counts as one field). An id with more than 16 versions
--   is critical: readings past version 16 are not made.
--   Example: evt_7 as task.progress at line 3 and evt_7 as task.completed at
--   line 9 fires once, citing both; the exact line 3 repeated is silent.
WITH conflicting AS (
    SELECT id FROM events WHERE version > 1 GROUP BY id
),
versions AS (
    SELECT e.* FROM events e JOIN conflicting c ON e.id = c.id
),
-- "Differs" is min < max, not count(DISTINCT) > 1: the same answer for
-- non-null values, but kept per group as two values, not a set (with 20 k
-- conflicting ids, the sets took 4 s and 0.8 GB).
per_id AS (
    SELECT id,
           count(*) AS n,
           array_agg(seq ORDER BY version) AS seqs,
           min(CAST(type AS VARCHAR)) < max(CAST(type AS VARCHAR)) AS d_type,
           min(source) < max(source) AS d_source,
           min(created_ns) < max(created_ns) AS d_created,
           min(coalesce(task_id, chr(0))) < max(coalesce(task_id, chr(0))) AS d_task,
           min(coalesce(parent_task_id, chr(0))) < max(coalesce(parent_task_id, chr(0))) AS d_parent,
           min(coalesce(causation_id, chr(0))) < max(coalesce(causation_id, chr(0))) AS d_causation,
           min(coalesce(correlation_id, chr(0))) < max(coalesce(correlation_id, chr(0))) AS d_correlation,
           min(coalesce(CAST(target AS VARCHAR), chr(0))) < max(coalesce(CAST(target AS VARCHAR), chr(0))) AS d_target,
           min(concat(coalesce(spec_version, chr(0)), chr(1), coalesce(aep_version, chr(0)))) < max(concat(coalesce(spec_version, chr(0)), chr(1), coalesce(aep_version, chr(0)))) AS d_version,
           min(coalesce(payload, chr(0))) < max(coalesce(payload, chr(0))) AS d_payload
    FROM versions
    GROUP BY id
)
SELECT coalesce(f.task_id, s.task_id) AS task_id,
       CASE WHEN p.n > 16 THEN 'critical' END AS severity,
       concat('event id ', log_value(p.id), ' has ', CAST(p.n AS VARCHAR), ' different contents: version 1 at ',
              f.src_file, ':', CAST(f.src_line AS VARCHAR),
              ' (', log_value(f.type), ', ', instant_text(f.created_at), '), version 2 at ',
              s.src_file, ':', CAST(s.src_line AS VARCHAR),
              ' (', log_value(s.type), ', ', instant_text(s.created_at), ')',
              CASE WHEN p.n > 2 THEN concat(' and ', CAST(p.n - 2 AS VARCHAR), ' more') ELSE '' END,
              '; differing: ',
              coalesce(nullif(concat_ws(', ',
                  CASE WHEN p.d_type THEN 'type' END,
                  CASE WHEN p.d_source THEN 'source' END,
                  CASE WHEN p.d_created THEN 'created_at' END,
                  CASE WHEN p.d_task THEN 'task_id' END,
                  CASE WHEN p.d_parent THEN 'parent_task_id' END,
                  CASE WHEN p.d_causation THEN 'causation_id' END,
                  CASE WHEN p.d_correlation THEN 'correlation_id' END,
                  CASE WHEN p.d_target THEN 'target' END,
                  CASE WHEN p.d_version THEN 'version field' END,
                  CASE WHEN p.d_payload THEN 'payload' END), ''),
                  'other fields'),
              '; ids must be unique: the rules read version 1, and every later version in a reading of its own',
              CASE WHEN p.n > 16 THEN ' (up to version 16; the rest are not read)' ELSE '' END) AS message,
       p.seqs AS seqs
FROM per_id p
JOIN versions f ON f.id = p.id AND f.version = 1
JOIN versions s ON s.id = p.id AND s.version = 2
