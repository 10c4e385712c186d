-- id: orphan.dangling_parent
-- severity: low
-- family: orphan
-- dialect: any
-- summary: a parent_task_id names a task that appears nowhere in the input
-- spec: docs/protocol.md §9.5 (parent link)
-- explain:
--   Fires once per distinct (task, named parent) pair whose parent_task_id
--   (envelope, payload.parent_task_id, or a delegation.* event's link) is not
--   the task_id of any event in the input. Events that carry a
--   parent_task_id but no task_id are checked too (one finding per parent
--   they name). The finding points at the first event carrying the link.
--   A parent outside the input may just be outside the audited window, hence
--   low: the parent/orphan rules cannot check such a child.
--   Example: task_9's task.submitted names parent_task_id task_7 and no event
--   has task_id task_7: fires; add task_7's task.submitted anywhere: silent.
WITH first_link AS (
    SELECT task_key, parent_key, min(time_order(created_ns, seq)) AS ord
    FROM ev
    WHERE parent_key IS NOT NULL
    GROUP BY task_key, parent_key
),
named_parents AS (
    SELECT e.task_id, e.parent_task_id, l.parent_key, e.seq AS link_seq, e.type AS link_type,
           e.id AS link_id, e.created_at AS link_at
    FROM first_link l
    JOIN ev e ON e.seq = seq_of(l.ord)
)
SELECT
    n.task_id,
    concat(CASE WHEN n.task_id IS NULL THEN 'an event without task_id'
                ELSE concat('task ', log_value(n.task_id)) END,
           ' names parent task ', log_value(n.parent_task_id), ' (', log_value(n.link_type), ' ', log_value(n.link_id), ' at ',
           instant_text(n.link_at),
           ') but no event in the input has task_id ', log_value(n.parent_task_id),
           '; expected the parent''s events in the audited logs') AS message,
    make_array(n.link_seq) AS seqs
FROM named_parents n
LEFT JOIN tasks p ON p.task_key = n.parent_key
WHERE p.task_key IS NULL
