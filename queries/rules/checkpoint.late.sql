-- id: checkpoint.late
-- severity: medium
-- family: checkpoint
-- dialect: any
-- summary: the checkpoint of a save_and_stop interruption was saved after the grace period
-- spec: docs/protocol.md §6 (checkpoints)
-- explain:
--   For each interruption.requested with interruption_policy save_and_stop
--   for task T, take the first interruption.saved for T with a
--   checkpoint_id in the same window as checkpoint.missing (before T's next
--   interruption.requested, its terminal event, or the end of the log).
--   Fires when it comes after the deadline, request created_at +
--   payload.grace_period_ms; saved exactly at the deadline is on time. A
--   request without grace_period_ms has no deadline and is never late;
--   neither has one whose grace period is negative or not an integer
--   (payload.invalid names it). Any integer form counts (5000, 5000.0, 5e3),
--   and a grace period too long to compute with is longer than any log.
--   Missing and late are exclusive.
--   Example: request at 10:05:00.000 with grace 5000 ms, saved at
--   10:05:05.001: fires; saved at 10:05:05.000: silent.
SELECT
    w.task_id,
    concat('interruption.saved ', w.saved_id, ' (checkpoint ', w.saved_checkpoint_id, ') for task ', w.task_id,
           ' at ', instant_text(w.saved_at), ' came ',
           (w.saved_us - w.created_us) / 1000, ' ms after interruption.requested ', w.id, ' at ',
           instant_text(w.created_at), '; expected it within the grace period of ',
           w.grace_period_ms, ' ms (by ', instant_text(to_timestamp_micros(w.created_us + w.grace_period_ms * 1000)),
           ')') AS message,
    make_array(w.saved_seq, w.seq) AS seqs
FROM save_requests w
WHERE w.saved_seq IS NOT NULL AND w.grace_period_ms IS NOT NULL
  -- overflow-free: a grace period past what int64 microseconds can hold
  -- (about 292,000 years) is capped there, still longer than any log; the
  -- deadline is only computed for the rows this keeps, where it is earlier
  -- than the save
  AND w.saved_us - w.created_us > least(w.grace_period_ms, 9223372036854775) * 1000
