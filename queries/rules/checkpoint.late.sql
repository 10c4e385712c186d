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
--   payload.grace_period_ms, to the nanosecond; saved exactly at the
--   deadline is on time. A
--   request without grace_period_ms has no deadline and is never late;
--   neither has one whose grace period is negative or not an integer
--   (payload.invalid names it). Any integer form counts (5000, 5000.0, 5e3),
--   and a grace period too long to compute with is longer than any log.
--   Missing and late are exclusive.
--   Example: request at 10:05:00.000 with grace 5000 ms, saved at
--   10:05:05.001: fires; saved at 10:05:05.000: silent.
SELECT
    w.task_id,
    concat('interruption.saved ', log_value(w.saved_id), ' (checkpoint ', log_value(w.saved_checkpoint_id), ') for task ', log_value(w.task_id),
           ' at ', instant_text(w.saved_at), ' came ',
           (CAST(w.saved_at AS BIGINT) - CAST(w.created_at AS BIGINT)) / 1000,
           ' ms after interruption.requested ', log_value(w.id), ' at ',
           instant_text(w.created_at), '; expected it within the grace period of ',
           w.grace_period_ms, ' ms (by ',
           instant_text(to_timestamp_micros(CAST(w.created_at AS BIGINT) + w.grace_period_ms * 1000)),
           ')') AS message,
    make_array(w.saved_seq, w.seq) AS seqs
FROM save_requests w
WHERE w.saved_seq IS NOT NULL AND w.grace_period_ms IS NOT NULL
  -- to the nanosecond, as decimals: int64 nanoseconds wrap silently past
  -- 292 years, both the time between the two (from 1677 to 2262, where
  -- created_ns ends) and a grace period (any int64 of milliseconds); a
  -- wrapped one would make a late save look early. The message shows
  -- microseconds (timestamps) as every message does; its deadline is only
  -- computed for the rows this keeps, where the grace period is shorter
  -- than the log, so it cannot overflow either.
  AND CAST(w.saved_ns AS DECIMAL(38, 0)) - w.created_ns
      > CAST(w.grace_period_ms AS DECIMAL(38, 0)) * 1000000
