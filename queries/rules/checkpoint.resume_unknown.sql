-- id: checkpoint.resume_unknown
-- severity: high
-- family: checkpoint
-- dialect: any
-- summary: interruption.resumed names a checkpoint that no earlier interruption.saved of the task recorded, and the task did not fail with checkpoint_missing
-- spec: docs/protocol.md §6 (checkpoints), §4 (task lifecycle)
-- explain:
--   Resume MUST name a saved checkpoint, or the task MUST fail with
--   checkpoint_missing. Fires for each interruption.resumed for task T
--   whose checkpoint_id (envelope, else payload.checkpoint_id) was not
--   recorded by any interruption.saved for T strictly before it (checkpoints
--   of other tasks do not count), unless T afterwards emits task.failed with
--   payload.error.code checkpoint_missing. Waiting for that failure runs to
--   the end of the log: when T has no terminal event after the resume,
--   --horizon applies (flag only with at least that much log after the
--   resume). A resume without any checkpoint_id is
--   checkpoint.resume_without_id.
--   Example: saved ckpt_1 at 10:05, resumed naming ckpt_2 at 10:10, then
--   task.progress: fires. Resumed naming ckpt_1: silent. Resumed naming
--   ckpt_2 followed by task.failed {error.code: checkpoint_missing}: silent.
WITH resumes AS (
    SELECT seq, id, task_id, task_key, created_ns, created_at,
           coalesce(checkpoint_id, p_checkpoint_id) AS ckpt
    FROM ev
    WHERE type = 'interruption.resumed' AND task_key IS NOT NULL
      AND coalesce(checkpoint_id, p_checkpoint_id) IS NOT NULL
),
known AS (
    -- resumes whose checkpoint was saved earlier for the same task
    SELECT DISTINCT r.seq
    FROM resumes r
    JOIN ev s ON s.task_key = r.task_key AND coalesce(s.checkpoint_id, s.p_checkpoint_id) = r.ckpt
    WHERE s.type = 'interruption.saved'
      AND (s.created_ns < r.created_ns OR (s.created_ns = r.created_ns AND s.seq < r.seq))
),
failed_as_required AS (
    SELECT DISTINCT r.seq
    FROM resumes r
    JOIN ev f ON f.task_key = r.task_key
    WHERE f.type = 'task.failed' AND f.error_code = 'checkpoint_missing'
      AND (f.created_ns > r.created_ns OR (f.created_ns = r.created_ns AND f.seq > r.seq))
),
saved_checkpoints AS (
    -- what the task did save before, for the message
    SELECT r.seq,
           string_agg(DISTINCT coalesce(s.checkpoint_id, s.p_checkpoint_id), ', ') AS saved_list
    FROM resumes r
    JOIN ev s ON s.task_key = r.task_key
    WHERE s.type = 'interruption.saved' AND coalesce(s.checkpoint_id, s.p_checkpoint_id) IS NOT NULL
      AND (s.created_ns < r.created_ns OR (s.created_ns = r.created_ns AND s.seq < r.seq))
    GROUP BY r.seq
)
SELECT
    r.task_id,
    concat('interruption.resumed ', log_value(r.id), ' for task ', log_value(r.task_id), ' at ',
           instant_text(r.created_at), ' names checkpoint ', log_value(r.ckpt),
           ', which no earlier interruption.saved of the task recorded (',
           CASE WHEN c.saved_list IS NULL THEN 'it saved none'
                ELSE concat('it saved: ', c.saved_list) END,
           '), and the task did not then fail with error code checkpoint_missing',
           CASE WHEN t.term_seq IS NOT NULL AND t.term_ns > r.created_ns
                THEN concat(' (it ended with ', log_value(t.term_type), ' at ',
                            instant_text(t.term_at), ')')
                ELSE '' END,
           '; expected a saved checkpoint or task.failed with checkpoint_missing') AS message,
    CASE WHEN t.term_seq IS NOT NULL AND t.term_ns > r.created_ns THEN make_array(r.seq, t.term_seq)
         ELSE make_array(r.seq) END AS seqs
FROM resumes r
JOIN tasks t ON t.task_key = r.task_key
CROSS JOIN log_end l
LEFT JOIN known k ON k.seq = r.seq
LEFT JOIN failed_as_required f ON f.seq = r.seq
LEFT JOIN saved_checkpoints c ON c.seq = r.seq
WHERE k.seq IS NULL AND f.seq IS NULL
  -- the task ended otherwise after the resume, or enough log follows it
  AND ((t.term_seq IS NOT NULL
        AND (t.term_ns > r.created_ns OR (t.term_ns = r.created_ns AND t.term_seq > r.seq)))
       OR r.created_ns <= l.cutoff_ns)
