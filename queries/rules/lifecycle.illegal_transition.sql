-- id: lifecycle.illegal_transition
-- severity: medium
-- family: lifecycle
-- dialect: any
-- summary: a task.* event is not a legal transition from the task's previous lifecycle event
-- spec: docs/protocol.md §4 (task lifecycle)
-- explain:
--   Each lifecycle event of a task (task.submitted, accepted, started,
--   progress, output, blocked, completed, failed, cancelled, timed_out) is
--   checked against the task's previous one (time, then input order) with
--   the lifecycle table (docs/protocol.md §4); the previous event counts
--   whether or not it was legal itself. So it fires on any event after a
--   terminal one (task.cancelled after task.completed), on a repeated
--   non-loop state (a second task.accepted), and on a first event other
--   than task.submitted -- except that a task delegated to its worker
--   (delegation.accepted or delegation.handoff.completed before its first
--   lifecycle event) counts as submitted + accepted, so it may start with
--   task.started (or still with task.submitted, the table's own start).
--   task.submitted -> task.started is lifecycle.skipped_accept
--   instead. task.cancel.requested is not a state and is skipped, but fires
--   here when it comes after the task's terminal event. Unknown task.* types
--   are envelope.unknown_type, not a transition. Exact redeliveries are
--   collapsed before this check, so a redelivered terminal event is silent.
--   Example: task.submitted, task.completed fires on the task.completed;
--   task.completed followed by task.cancelled fires on the task.cancelled.
WITH legal_next AS (
    SELECT from_type, string_agg(to_type, ', ' ORDER BY to_type) AS allowed
    FROM lifecycle_next
    GROUP BY from_type
),
illegal_states AS (
    SELECT x.task_id, x.seq, x.from_seq,
           concat('task ', log_value(x.task_id), ': ', log_value(x.type), ' ', log_value(x.id), ' at ', instant_text(x.created_at),
                  CASE WHEN x.from_type = '(none)'
                       THEN ' is its first lifecycle event; expected task.submitted first (or a delegation.accepted / delegation.handoff.completed for it)'
                       WHEN x.from_type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')
                       THEN concat(' follows ', x.from_label, ' at ', instant_text(x.from_at),
                                   ', a terminal state; expected no task event after it')
                       ELSE concat(' follows ', x.from_label, ' at ', instant_text(x.from_at),
                                   '; expected one of: ', n.allowed)
                  END) AS message
    FROM irregular_transitions x
    LEFT JOIN legal_next n ON n.from_type = x.from_type
    WHERE NOT x.legal AND NOT x.skipped_accept
),
cancel_requests_after_end AS (
    SELECT c.task_id, c.seq, t.term_seq AS from_seq,
           concat('task ', log_value(c.task_id), ': task.cancel.requested ', log_value(c.id), ' at ',
                  instant_text(c.created_at), ' comes after the task ended with ',
                  log_value(t.term_type), ' ', log_value(t.term_id), ' at ', instant_text(t.term_at),
                  '; expected no cancel request for a finished task') AS message
    FROM ev c
    JOIN tasks t ON t.task_key = c.task_key
    WHERE c.type = 'task.cancel.requested'
      AND (t.term_ns < c.created_ns OR (t.term_ns = c.created_ns AND t.term_seq < c.seq))
),
all_findings AS (
    SELECT * FROM illegal_states
    UNION ALL
    SELECT * FROM cancel_requests_after_end
)
SELECT task_id, message,
       CASE WHEN from_seq IS NULL THEN make_array(seq) ELSE make_array(seq, from_seq) END AS seqs
FROM all_findings
