-- One row: the end of the audited log (the last event instant of the whole
-- input) and the --horizon as microseconds (0 when not set). A rule that
-- waits for something up to the end of the log fires only when
-- end_us - <opening event's created_us> >= horizon_us. A horizon past what
-- int64 microseconds hold is capped there (longer than any log: nothing is
-- flagged), never wrapped into a negative one (everything flagged).
-- (least() skips nulls: the coalesce comes first.)
SELECT l.end_us, l.end_at, least(coalesce(s.horizon_ms, 0), 9223372036854775) * 1000 AS horizon_us
FROM (SELECT max(created_us) AS end_us, max(created_at) AS end_at FROM events) l
CROSS JOIN settings s
