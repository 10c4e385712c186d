-- id: delegation.escalated_after_rejection
-- severity: medium
-- family: delegation
-- dialect: any
-- summary: delegation.escalated for a task whose delegation was already rejected
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   delegation.rejected ends the delegation flow; escalation moves a live
--   delegation to a supervisor, so escalating after a rejection is invalid.
--   Fires for each delegation.escalated whose task_id had a
--   delegation.rejected strictly before it (time, then input order). Keyed
--   on task_id alone: the escalation names a new delegate, so the
--   rejecting delegate never matches it. The finding names the latest
--   rejection before the escalation.
--   Example: delegation.rejected for task_rej_child_2 at 11:00:04, then
--   delegation.escalated for it at 11:00:05: fires. An escalation of a
--   requested, never rejected delegation: silent.
WITH escalations AS (
    SELECT seq, id, task_id, task_key, delegated_to, created_ns, created_at
    FROM ev
    WHERE type = 'delegation.escalated' AND task_key IS NOT NULL
),
rejected_before AS (
    SELECT x.seq,
           count(*) AS n_rejections,
           first_value(j.seq ORDER BY j.created_ns DESC, j.seq DESC) AS j_seq,
           first_value(j.id ORDER BY j.created_ns DESC, j.seq DESC) AS j_id,
           first_value(j.delegated_to ORDER BY j.created_ns DESC, j.seq DESC) AS j_to,
           first_value(j.created_at ORDER BY j.created_ns DESC, j.seq DESC) AS j_at
    FROM escalations x
    JOIN ev j ON j.task_key = x.task_key AND j.type = 'delegation.rejected'
    WHERE j.created_ns < x.created_ns OR (j.created_ns = x.created_ns AND j.seq < x.seq)
    GROUP BY x.seq
)
SELECT
    x.task_id,
    concat('delegation.escalated ', log_value(x.id), ' for task ', log_value(x.task_id),
           CASE WHEN x.delegated_to IS NULL THEN '' ELSE concat(' to ', log_value(x.delegated_to)) END,
           ' at ', instant_text(x.created_at), ' comes after its delegation was rejected',
           CASE WHEN j.j_to IS NULL THEN '' ELSE concat(' by ', log_value(j.j_to)) END,
           ' (', log_value(j.j_id), ' at ', instant_text(j.j_at), ')',
           '; expected a new delegation.requested, not an escalation of a rejected one') AS message,
    make_array(x.seq, j.j_seq) AS seqs
FROM escalations x
JOIN rejected_before j ON j.seq = x.seq
