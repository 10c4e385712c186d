-- id: parent.child_terminated_first
-- severity: high
-- family: parent
-- dialect: 0.1
-- summary: a 0.1 child reached a terminal state before its parent did, and the parent was not being cancelled
-- spec: docs/protocol.md §1 (versions), §9.7 (children)
-- explain:
--   AEP 0.1 (and early 0.2 releases, via --spec 0.1): a child must not reach
--   a terminal state before its parent does, unless the parent was cancelled
--   first. The child's dialect (or --spec) decides. Fires when a direct
--   child's first terminal event comes before the parent's first terminal
--   event (time, then input order), unless a task.cancel.requested or
--   task.cancelled for the parent came before the child's terminal event
--   (the child then ends as part of the cancellation). A parent with no
--   terminal event in the input gives no finding: the order is not proven.
--   In 0.2 a child finishing first is the normal pattern and never a finding.
--   Example (0.1): child task_9 completes at 10:00:05, parent task_7
--   completes at 10:00:09: fires on task_9's task.completed. A
--   task.cancel.requested for task_7 at 10:00:03 makes it silent.
WITH child_first AS (
    SELECT * FROM task_links
    WHERE c_dialect = '0.1' AND c_term_seq IS NOT NULL AND p_term_seq IS NOT NULL
      AND (c_term_ns < p_term_ns OR (c_term_ns = p_term_ns AND c_term_seq < p_term_seq))
),
cancel_before_child_end AS (
    -- the parent was being cancelled when the child ended
    SELECT DISTINCT k.child_id, k.parent_id
    FROM child_first k
    JOIN ev r ON r.task_key = k.parent_key
    WHERE r.type IN ('task.cancel.requested', 'task.cancelled')
      AND (r.created_ns < k.c_term_ns OR (r.created_ns = k.c_term_ns AND r.seq < k.c_term_seq))
)
SELECT
    k.child_id AS task_id,
    concat('child task ', log_value(k.child_id), ' (0.1) reached ', log_value(k.c_term_type), ' at ',
           instant_text(k.c_term_at), ' before its parent ', log_value(k.parent_id),
           ' reached ', log_value(k.p_term_type), ' at ', instant_text(k.p_term_at),
           '; AEP 0.1 expects the parent to end first unless it was cancelled first',
           ' (use --spec 0.2 if the runtime follows current Harmovela 0.2)') AS message,
    make_array(k.c_term_seq, k.p_term_seq) AS seqs
FROM child_first k
LEFT JOIN cancel_before_child_end c ON c.child_id = k.child_id AND c.parent_id = k.parent_id
WHERE c.child_id IS NULL
