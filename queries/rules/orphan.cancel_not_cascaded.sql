-- id: orphan.cancel_not_cascaded
-- severity: high
-- family: orphan
-- dialect: any
-- summary: a parent was cancelled while a child was active, and the child never reached task.cancelled
-- spec: docs/protocol.md §4 (task lifecycle), §5 (delegation and handoff tokens), §9.6 (active)
-- explain:
--   Fires for each direct child that is active at the instant its parent
--   reaches task.cancelled (the parent's first terminal event) and whose own
--   first terminal event afterwards is not task.cancelled: it completed,
--   failed or timed out instead, or it never ends in the input.
--   "Active" as docs/protocol.md §9.6 has it: from the child's first
--   task.* event or its delegation.accepted / delegation.handoff.completed,
--   whichever is first, until its first terminal event; ties in time go by
--   input order. A child only requested in a delegation (then rejected) is
--   never active.
--   Applies in both dialects: the cancel cascade is asked for in 0.1 and 0.2.
--   A child that never ends is a wait up to the end of the log, so under
--   --horizon it is only flagged when at least that much log follows the
--   parent's cancellation. A cascade whose causation link is missing is not
--   this rule but orphan.cascade_unlinked.
--   Example: task_7 cancelled at 12:30:10 while child task_9 (started
--   12:30:05) runs; task_9 then completes at 12:30:20: fires on task_9's
--   task.completed. Had task_9 emitted task.cancelled instead: silent.
WITH cancelled_parent_active_child AS (
    SELECT * FROM task_links
    WHERE p_term_type = 'task.cancelled' AND active_at_parent_end
      AND (c_term_type IS NULL OR c_term_type <> 'task.cancelled')
)
SELECT
    k.child_id AS task_id,
    concat('child task ', log_value(k.child_id), ' (active since ', instant_text(k.c_active_at),
           ') was not cancelled with its parent ', log_value(k.parent_id), ', cancelled at ',
           instant_text(k.p_term_at), ': ',
           CASE WHEN k.c_term_seq IS NULL
                THEN concat('it never reached a terminal state (log ends at ', instant_text(l.end_at), ')')
                ELSE concat('it ended with ', log_value(k.c_term_type), ' at ', instant_text(k.c_term_at))
           END,
           '; expected task.cancelled for the child after the parent''s cancellation') AS message,
    CASE WHEN k.c_term_seq IS NULL THEN make_array(k.p_term_seq, k.c_active_seq)
         ELSE make_array(k.c_term_seq, k.p_term_seq, k.c_active_seq) END AS seqs
FROM cancelled_parent_active_child k
CROSS JOIN log_end l
-- a child that has not ended yet is only flagged with enough log after the cancel
WHERE k.c_term_seq IS NOT NULL OR k.p_term_ns <= l.cutoff_ns
