-- id: parent.terminated_early
-- severity: high
-- family: parent
-- dialect: 0.2
-- summary: a 0.2 parent reached a terminal state while a child was still active
-- spec: docs/protocol.md §1 (versions), §4 (task lifecycle), §9.6 (active)
-- explain:
--   Harmovela 0.2 (current): a parent MUST NOT reach a terminal state while
--   a child is active; a child may finish first. The parent's dialect (or
--   --spec) decides. Fires once per parent whose first terminal event comes
--   while at least one direct child is active (docs/protocol.md §9.6: from the
--   child's first task.* event or delegation.accepted / handoff.completed
--   until its first terminal event; ties in time go by input order). The
--   finding lists every child active at that instant and what became of it.
--   Exception, the cascade the spec asks for: the parent's terminal state is
--   task.cancelled and every child active then reaches task.cancelled
--   afterwards (a missing causation link is only orphan.cascade_unlinked).
--   For a cancelled parent, a child that has not ended by the end of the log
--   could still be cancelled later: under --horizon it only breaks the
--   exception when at least that much log follows the cancellation.
--   Example: task_7 (0.2) completes at 12:30:10 while child task_9, started
--   at 12:30:05, has not ended: fires on task_7's task.completed. task_9
--   completing at 12:30:09 first is silent.
WITH active_children AS (
    SELECT k.*,
           -- this child breaks the rule: any child of a parent that did not
           -- cancel; for a cancelled parent, a child not cancelled afterwards
           (k.p_term_type <> 'task.cancelled'
            OR (k.c_term_seq IS NOT NULL AND k.c_term_type <> 'task.cancelled')
            OR (k.c_term_seq IS NULL AND k.p_term_ns <= l.cutoff_ns)) AS breaks
    FROM task_links k
    CROSS JOIN log_end l
    WHERE k.p_dialect = '0.2' AND k.active_at_parent_end
),
per_parent AS (
    SELECT parent_id, p_term_seq, p_term_type, p_term_at,
           count(*) AS n_active,
           sum(CASE WHEN breaks THEN 1 ELSE 0 END) AS n_breaking,
           string_agg(concat(log_value(child_id), ' (active since ', instant_text(c_active_at),
                             CASE WHEN c_term_seq IS NULL THEN ', never ended'
                                  ELSE concat(', then ', log_value(c_term_type), ' at ',
                                              instant_text(c_term_at)) END, ')'),
                      ', ' ORDER BY c_active_ns, c_active_seq, child_id) AS children,
           array_agg(c_active_seq ORDER BY c_active_ns, c_active_seq, child_id) AS child_seqs
    FROM active_children
    GROUP BY parent_id, p_term_seq, p_term_type, p_term_at
)
SELECT
    parent_id AS task_id,
    concat('parent task ', log_value(parent_id), ' (0.2) reached ', log_value(p_term_type), ' at ',
           instant_text(p_term_at), ' while ', n_active,
           CASE WHEN n_active = 1 THEN ' child was' ELSE ' children were' END, ' still active: ', children,
           CASE WHEN p_term_type = 'task.cancelled'
                THEN '; expected every active child to be cancelled after the parent''s cancellation'
                ELSE '; expected every child to end before the parent' END) AS message,
    array_concat(make_array(p_term_seq), child_seqs) AS seqs
FROM per_parent
WHERE n_breaking > 0
