-- id: checkpoint.not_stopped
-- severity: medium
-- family: checkpoint
-- dialect: any
-- summary: a task kept emitting task.progress / task.output after it was told to stop (saved under save_and_stop, acknowledged under force_stop)
-- spec: docs/protocol.md §6 (checkpoints)
-- explain:
--   The stop point is an interruption.saved under policy save_and_stop or
--   an interruption.acknowledged under force_stop. The policy is the event's
--   own interruption_policy, else that of the task's latest
--   interruption.requested at or before it. Fires once per stop point when
--   the task emits task.progress or task.output after it and before the
--   task's next interruption.resumed, its terminal event, or its next stop
--   point (time, then input order; work after a later stop point is
--   reported once, for that one); the finding names the first such event
--   and counts them.
--   drain_then_stop is not covered: "the current unit" it may finish is not
--   visible in a log.
--   Example: save_and_stop request, interruption.saved at 10:05:02,
--   task.progress at 10:05:03: fires on the task.progress. The same
--   task.progress after interruption.resumed at 10:06: silent.
WITH candidates AS (
    SELECT seq, id, type, task_id, task_key, interruption_policy, created_ns, created_at
    FROM ev
    WHERE type IN ('interruption.saved', 'interruption.acknowledged') AND task_key IS NOT NULL
),
request_policy AS (
    -- policy of the latest interruption.requested at or before the candidate
    SELECT c.seq,
           first_value(r.interruption_policy ORDER BY r.created_ns DESC, r.seq DESC) AS policy
    FROM candidates c
    JOIN ev r ON r.task_key = c.task_key AND r.type = 'interruption.requested'
    WHERE r.created_ns < c.created_ns OR (r.created_ns = c.created_ns AND r.seq < c.seq)
    GROUP BY c.seq
),
stops AS (
    SELECT c.*, coalesce(c.interruption_policy, p.policy) AS policy
    FROM candidates c
    LEFT JOIN request_policy p ON p.seq = c.seq
    WHERE (c.type = 'interruption.saved' AND coalesce(c.interruption_policy, p.policy) = 'save_and_stop')
       OR (c.type = 'interruption.acknowledged' AND coalesce(c.interruption_policy, p.policy) = 'force_stop')
),
closers AS (
    -- what ends a stop: a resume, the task's terminal event, or a later stop
    -- point (work after it is attributed to that one). The branches agree in
    -- nullability (coalesce of values the filter keeps non-null): a union's
    -- rows keep their branch's schema, and a cluster's shuffle writer checks
    -- them against the union's.
    SELECT task_key, seq, created_ns FROM ev
    WHERE type = 'interruption.resumed' AND task_key IS NOT NULL
    UNION ALL
    SELECT task_key, coalesce(term_seq, 0), coalesce(term_ns, 0) FROM tasks
    WHERE term_seq IS NOT NULL
    UNION ALL
    SELECT task_key, seq, created_ns FROM stops
),
first_closer AS (
    SELECT s.seq,
           first_value(c.seq ORDER BY c.created_ns, c.seq) AS close_seq,
           first_value(c.created_ns ORDER BY c.created_ns, c.seq) AS close_ns
    FROM stops s
    JOIN closers c ON c.task_key = s.task_key
    WHERE c.created_ns > s.created_ns OR (c.created_ns = s.created_ns AND c.seq > s.seq)
    GROUP BY s.seq
),
windows AS (
    -- from the stop point to its first closer (null: open to the end of the log)
    SELECT s.*, f.close_seq, f.close_ns
    FROM stops s
    LEFT JOIN first_closer f ON f.seq = s.seq
),
kept_working AS (
    -- the stop point's own columns ride along in the grouping (one row per
    -- stop point; only the few with work after them get here), so the final
    -- select needs no second join with windows, which would plan stops again
    SELECT w.seq, w.task_id, w.type, w.id, w.policy, w.created_at,
           count(*) AS n_work,
           first_value(e.seq ORDER BY e.created_ns, e.seq) AS work_seq,
           first_value(e.id ORDER BY e.created_ns, e.seq) AS work_id,
           first_value(e.type ORDER BY e.created_ns, e.seq) AS work_type,
           first_value(e.created_at ORDER BY e.created_ns, e.seq) AS work_at
    FROM windows w
    JOIN ev e ON e.task_key = w.task_key AND e.type IN ('task.progress', 'task.output')
    WHERE (e.created_ns > w.created_ns OR (e.created_ns = w.created_ns AND e.seq > w.seq))
      AND (w.close_seq IS NULL OR e.created_ns < w.close_ns
           OR (e.created_ns = w.close_ns AND e.seq < w.close_seq))
    GROUP BY w.seq, w.task_id, w.type, w.id, w.policy, w.created_at
)
SELECT
    k.task_id,
    concat('task ', log_value(k.task_id), ' emitted ', log_value(k.work_type), ' ', log_value(k.work_id), ' at ', instant_text(k.work_at),
           CASE WHEN k.n_work > 1 THEN concat(' (and ', k.n_work - 1, ' more progress/output events)') ELSE '' END,
           ' after ', log_value(k.type), ' ', log_value(k.id), ' (', log_value(k.policy), ') at ', instant_text(k.created_at),
           '; expected it to stop until interruption.resumed or its terminal event') AS message,
    make_array(k.work_seq, k.seq) AS seqs
FROM kept_working k
