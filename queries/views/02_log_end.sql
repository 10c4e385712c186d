-- One row: the end of the audited log (the last event instant of the whole
-- input: end_ns, end_at) and cutoff_ns, the last instant with at least the
-- --horizon of log after it (end_ns when no horizon is set). A rule that
-- waits for something up to the end of the log fires only when the event
-- that opened the wait has created_ns <= cutoff_ns. cutoff_ns is null when
-- the horizon is longer than any log can be (nothing is flagged): it is
-- computed as a decimal, since int64 nanoseconds wrap silently long before
-- a horizon in milliseconds does, and a wrapped cutoff would flag every wait.
SELECT end_ns, end_at,
       CASE WHEN cutoff >= -9223372036854775808 THEN CAST(cutoff AS BIGINT) END AS cutoff_ns
FROM (
    SELECT l.end_ns, l.end_at,
           CAST(l.end_ns AS DECIMAL(38, 0))
           - CAST(coalesce(s.horizon_ms, 0) AS DECIMAL(38, 0)) * 1000000 AS cutoff
    FROM (SELECT max(created_ns) AS end_ns, max(created_at) AS end_at FROM events) l
    CROSS JOIN settings s
) c
