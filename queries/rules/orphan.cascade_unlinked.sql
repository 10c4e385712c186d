-- id: orphan.cascade_unlinked
-- severity: low
-- family: orphan
-- dialect: any
-- summary: a child's task.cancelled after its parent's cancellation does not name that cancellation as its cause
-- spec: docs/protocol.md §4 (task lifecycle), §9.7 (children)
-- explain:
--   The parent's first terminal event is task.cancelled at t, and a direct
--   child's first terminal event is a task.cancelled after t (time, then
--   input order). Fires when that child cancellation's causation_id is
--   neither the id of the parent's task.cancelled nor the id of any
--   task.cancel.requested for the parent (a missing causation_id counts as
--   not referencing it). The cascade itself happened, so this is only the
--   missing link that lets a reader tie the two together.
--   Example: parent task_7 cancelled by evt_40; child task_9's task.cancelled
--   evt_41 with causation_id evt_40 is silent; with causation_id evt_39 (the
--   child's own task.started) or none it fires.
WITH cascaded AS (
    -- children cancelled after their parent was cancelled
    SELECT * FROM task_links
    WHERE p_term_type = 'task.cancelled' AND c_term_type = 'task.cancelled'
      AND (c_term_ns > p_term_ns OR (c_term_ns = p_term_ns AND c_term_seq > p_term_seq))
),
linked_to_request AS (
    -- child cancellations caused by a cancel request for the parent
    SELECT DISTINCT k.child_id, k.parent_id
    FROM cascaded k
    JOIN ev r ON r.task_key = k.parent_key AND r.id = k.c_term_causation_id
    WHERE r.type = 'task.cancel.requested'
)
SELECT
    k.child_id AS task_id,
    concat('child task ', log_value(k.child_id), ' was cancelled at ', instant_text(k.c_term_at),
           ' (', log_value(k.c_term_id), ') after its parent ', log_value(k.parent_id), ' was cancelled at ',
           instant_text(k.p_term_at), ' (', log_value(k.p_term_id), '), but its causation_id is ',
           CASE WHEN k.c_term_causation_id IS NULL THEN 'missing'
                ELSE k.c_term_causation_id END,
           '; expected ', log_value(k.p_term_id), ' or the id of the parent''s task.cancel.requested') AS message,
    make_array(k.c_term_seq, k.p_term_seq) AS seqs
FROM cascaded k
LEFT JOIN linked_to_request r ON r.child_id = k.child_id AND r.parent_id = k.parent_id
WHERE (k.c_term_causation_id IS NULL OR k.c_term_causation_id <> k.p_term_id)
  AND r.child_id IS NULL
