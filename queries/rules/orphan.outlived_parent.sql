-- id: orphan.outlived_parent
-- severity: high
-- family: orphan
-- dialect: any
-- summary: a child active when its parent ended (not by cancellation) never ends, or (0.2) keeps emitting events
-- spec: docs/protocol.md §1 (versions), §4 (task lifecycle), §9.6 (active)
-- explain:
--   The parent reaches a terminal state other than task.cancelled at t (its
--   first terminal event) while a direct child is active (docs/protocol.md
--   §9.6). Fires when the child then never reaches a terminal state in
--   the input, or -- only when the child's dialect is 0.2 -- when the child
--   emits any further non-terminal event after t (any event carrying its
--   task_id, task.* or not, e.g. task.progress, tool.call.requested). In 0.1
--   a child finishing after its parent is the rule, so there only a child
--   that never ends is an orphan. The child's dialect (or --spec) decides.
--   A child that never ends and emits nothing more is a wait up to the end
--   of the log: under --horizon it is flagged only when at least that much
--   log follows the parent's terminal event.
--   Cancelled parents are orphan.cancel_not_cascaded.
--   Example (0.2): parent task_7 completes at 12:30:10; child task_9 emits
--   task.progress at 12:30:12 and completes at 12:30:20: fires on that
--   task.progress. The same child completing at 12:30:20 with nothing in
--   between is silent here (parent.terminated_early reports the parent).
WITH orphaned AS (
    -- children active when the parent ended other than by cancellation
    SELECT * FROM task_links
    WHERE p_term_type IS NOT NULL AND p_term_type <> 'task.cancelled'
      AND active_at_parent_end
),
later_events AS (
    -- 0.2 children: their non-terminal events after the parent's end
    SELECT o.child_id, o.parent_id,
           count(*) AS n_later,
           first_value(e.seq ORDER BY e.created_ns, e.seq) AS later_seq,
           first_value(e.type ORDER BY e.created_ns, e.seq) AS later_type,
           first_value(e.created_at ORDER BY e.created_ns, e.seq) AS later_at
    FROM orphaned o
    JOIN ev e ON e.task_key = o.child_key
    WHERE o.c_dialect = '0.2'
      AND e.type NOT IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')
      AND (e.created_ns > o.p_term_ns OR (e.created_ns = o.p_term_ns AND e.seq > o.p_term_seq))
    GROUP BY o.child_id, o.parent_id
)
SELECT
    o.child_id AS task_id,
    concat('child task ', log_value(o.child_id), ' (', log_value(o.c_dialect), ', active since ',
           instant_text(o.c_active_at), ') outlived its parent ', log_value(o.parent_id),
           ', which reached ', log_value(o.p_term_type), ' at ', instant_text(o.p_term_at), ': ',
           CASE WHEN x.later_seq IS NOT NULL
                THEN concat('it emitted ', x.n_later, ' more non-terminal event(s) afterwards, the first ',
                            log_value(x.later_type), ' at ', instant_text(x.later_at),
                            CASE WHEN o.c_term_seq IS NULL THEN ', and never reached a terminal state'
                                 ELSE concat(', and ended with ', log_value(o.c_term_type), ' at ',
                                             instant_text(o.c_term_at)) END)
                ELSE concat('it never reached a terminal state (log ends at ',
                            instant_text(l.end_at), ')')
           END,
           '; expected the child to end before its parent, or the parent to cancel it') AS message,
    CASE WHEN x.later_seq IS NOT NULL THEN make_array(x.later_seq, o.p_term_seq, o.c_active_seq)
         ELSE make_array(o.p_term_seq, o.c_active_seq) END AS seqs
FROM orphaned o
CROSS JOIN log_end l
LEFT JOIN later_events x ON x.child_id = o.child_id AND x.parent_id = o.parent_id
WHERE x.later_seq IS NOT NULL
   -- a child that never ends: only with enough log after the parent's end
   OR (o.c_term_seq IS NULL AND o.p_term_ns <= l.cutoff_ns)
