-- id: checkpoint.missing
-- severity: high
-- family: checkpoint
-- dialect: any
-- summary: a save_and_stop interruption was never answered by an interruption.saved with a checkpoint_id
-- spec: docs/protocol.md §6 (checkpoints)
-- explain:
--   For each interruption.requested with interruption_policy save_and_stop
--   for task T: fires when no interruption.saved for T carrying a
--   checkpoint_id (envelope checkpoint_id or payload.checkpoint_id) comes
--   after it and before T's next interruption.requested, T's terminal
--   event, or the end of the log, whichever is first (time, then input
--   order). A save without checkpoint_id does not count. A request for a
--   task that had already ended is not checked (nothing left to save). When
--   the window runs to the end of the log, --horizon applies: the request is
--   only flagged when at least that much log follows it. A save that exists
--   but comes after the grace period is checkpoint.late, never both.
--   Example: request at 10:05:00 (grace 5000 ms), task.completed at
--   10:05:09 with no save in between: fires. interruption.saved with
--   checkpoint_id ckpt_1 at 10:05:04: silent.
SELECT
    w.task_id,
    concat('interruption.requested ', log_value(w.id), ' (save_and_stop',
           CASE WHEN w.grace_period_ms IS NULL THEN ''
                ELSE concat(', grace ', w.grace_period_ms, ' ms') END,
           ') for task ', log_value(w.task_id), ' at ', instant_text(w.created_at),
           ' got no interruption.saved with a checkpoint_id before ',
           CASE w.close_kind
                WHEN 'terminal' THEN concat('the task''s ', log_value(w.term_type), ' at ', instant_text(w.close_at))
                WHEN 'request' THEN concat('the next interruption.requested at ', instant_text(w.close_at))
                ELSE concat('the end of the log at ', instant_text(l.end_at)) END,
           '; expected the task to save a checkpoint and stop') AS message,
    CASE WHEN w.close_seq IS NULL THEN make_array(w.seq)
         ELSE make_array(w.seq, w.close_seq) END AS seqs
FROM save_requests w
CROSS JOIN log_end l
WHERE w.saved_seq IS NULL
  -- waiting up to the end of the log: only with enough log after the request
  AND (w.close_kind <> 'end' OR w.created_ns <= l.cutoff_ns)
