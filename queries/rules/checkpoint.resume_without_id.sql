-- id: checkpoint.resume_without_id
-- severity: high
-- family: checkpoint
-- dialect: any
-- summary: interruption.resumed carries no checkpoint_id
-- spec: docs/protocol.md §6 (checkpoints)
-- explain:
--   Resume MUST name the checkpoint it resumes from. Fires for every
--   interruption.resumed that has neither an envelope checkpoint_id nor a
--   payload.checkpoint_id (an empty string counts as present and is then
--   judged by checkpoint.resume_unknown).
--   Example: interruption.resumed for task_01 with payload {} fires; with
--   checkpoint_id ckpt_task_01 it is silent.
SELECT
    e.task_id,
    concat('interruption.resumed ', log_value(e.id),
           CASE WHEN e.task_id IS NULL THEN '' ELSE concat(' for task ', log_value(e.task_id)) END,
           ' at ', instant_text(e.created_at),
           ' names no checkpoint_id (neither in the envelope nor in the payload)',
           '; expected the id of the checkpoint the task resumes from') AS message,
    make_array(e.seq) AS seqs
FROM ev e
WHERE e.type = 'interruption.resumed'
  AND e.checkpoint_id IS NULL AND e.p_checkpoint_id IS NULL
