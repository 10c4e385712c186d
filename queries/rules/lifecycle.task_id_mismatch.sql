-- id: lifecycle.task_id_mismatch
-- severity: low
-- family: lifecycle
-- dialect: any
-- summary: a task.* event whose payload.task_id is missing or differs from the envelope task_id
-- spec: docs/protocol.md §4 (task lifecycle)
-- explain:
--   Task events MUST carry task_id both in the envelope and in the payload.
--   Fires for every task.* event (task.cancel.requested included) whose
--   payload.task_id is missing, or differs from the envelope task_id
--   (including an envelope without task_id). The other rules key tasks on
--   the envelope task_id.
--   Example: task.progress with task_id task_7 and payload {"progress": 0.5}
--   fires (payload.task_id missing); payload {"task_id": "task_7"} is silent.
SELECT
    e.task_id,
    concat(log_value(e.type), ' ', log_value(e.id), ' at ', instant_text(e.created_at), ': ',
           CASE WHEN e.p_task_id IS NULL
                THEN concat('payload.task_id is missing (envelope task_id ', log_value(coalesce(e.task_id, 'missing too')), ')')
                WHEN e.task_id IS NULL
                THEN concat('the envelope has no task_id (payload.task_id ', log_value(e.p_task_id), ')')
                ELSE concat('payload.task_id ', log_value(e.p_task_id), ' differs from the envelope task_id ', log_value(e.task_id)) END,
           '; expected the same task_id in the envelope and in the payload') AS message,
    make_array(e.seq) AS seqs
FROM ev e
WHERE e.type LIKE 'task.%'
  AND (e.p_task_id IS NULL OR e.p_task_id IS DISTINCT FROM e.task_id)
