-- id: lifecycle.skipped_accept
-- severity: info
-- family: lifecycle
-- dialect: any
-- summary: task.started directly after task.submitted, without task.accepted
-- spec: docs/protocol.md §4 (task lifecycle)
-- explain:
--   The lifecycle table goes SUBMITTED -> ACCEPTED -> STARTED; the reference
--   runtimes accept implicitly on submit, so task.started right after
--   task.submitted is common and harmless. It is reported here, as info,
--   instead of as lifecycle.illegal_transition. A task delegated to its
--   worker (delegation.accepted / handoff.completed first) counts as
--   accepted and starting it is not a skipped accept.
--   Example: task.submitted at 10:00:02, task.started at 10:00:03: fires on
--   the task.started; with task.accepted in between: silent.
SELECT
    x.task_id,
    concat('task ', log_value(x.task_id), ': ', log_value(x.type), ' ', log_value(x.id), ' at ', instant_text(x.created_at),
           ' follows ', x.from_label, ' at ', instant_text(x.from_at),
           ' without task.accepted (implicit accept); the lifecycle table expects task.accepted in between') AS message,
    make_array(x.seq, x.from_seq) AS seqs
FROM irregular_transitions x
WHERE x.skipped_accept
