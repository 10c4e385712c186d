-- materialize: true
-- (Materialized: checkpoint.missing and checkpoint.late both read it, and
-- each would otherwise compute the windows and the saves again.)
-- interruption.requested events with policy save_and_stop, each with the
-- window in which its checkpoint must be saved and the first save in it.
-- The window runs from the request to the first of: the task's next
-- interruption.requested (any policy), its terminal event, or the end of
-- the log (close_kind 'request' / 'terminal' / 'end'; close_* null for
-- 'end'). Requests for a task that had already ended are left out: there is
-- nothing left to save. saved_* is the first interruption.saved for the task
-- inside the window that carries a checkpoint_id (envelope or payload).
WITH ordered AS (
    -- one window over all tasks in (task, time, input order); the next row
    -- is the task's next request when it has the same key (faster than
    -- PARTITION BY task_key, as in 14_irregular_transitions.sql)
    SELECT seq, id, task_id, task_key, interruption_policy, grace_period_ms, created_ns, created_at,
           lead(task_key) OVER w AS lead_task_key,
           lead(seq) OVER w AS lead_seq,
           lead(created_ns) OVER w AS lead_ns,
           lead(created_at) OVER w AS lead_at
    FROM ev
    WHERE type = 'interruption.requested' AND task_key IS NOT NULL
    WINDOW w AS (ORDER BY task_key, created_ns, seq)
),
requests AS (
    SELECT seq, id, task_id, task_key, interruption_policy, grace_period_ms, created_ns, created_at,
           CASE WHEN lead_task_key = task_key THEN lead_seq END AS next_seq,
           CASE WHEN lead_task_key = task_key THEN lead_ns END AS next_ns,
           CASE WHEN lead_task_key = task_key THEN lead_at END AS next_at
    FROM ordered
),
save_requests AS (
    SELECT r.seq, r.id, r.task_id, r.task_key, r.grace_period_ms, r.created_ns, r.created_at,
           t.term_type,
           -- the task's terminal event closes the window if it comes first
           (t.term_seq IS NOT NULL
            AND (r.next_seq IS NULL OR t.term_ns < r.next_ns
                 OR (t.term_ns = r.next_ns AND t.term_seq < r.next_seq))) AS closed_by_terminal,
           r.next_seq, r.next_ns, r.next_at, t.term_seq, t.term_ns, t.term_at
    FROM requests r
    JOIN tasks t ON t.task_key = r.task_key
    WHERE r.interruption_policy = 'save_and_stop'
      -- the task had not ended before the request
      AND (t.term_seq IS NULL OR t.term_ns > r.created_ns
           OR (t.term_ns = r.created_ns AND t.term_seq > r.seq))
),
windows AS (
    SELECT seq, id, task_id, task_key, grace_period_ms, created_ns, created_at, term_type,
           CASE WHEN closed_by_terminal THEN 'terminal'
                WHEN next_seq IS NOT NULL THEN 'request' ELSE 'end' END AS close_kind,
           CASE WHEN closed_by_terminal THEN term_seq ELSE next_seq END AS close_seq,
           CASE WHEN closed_by_terminal THEN term_ns ELSE next_ns END AS close_ns,
           CASE WHEN closed_by_terminal THEN term_at ELSE next_at END AS close_at
    FROM save_requests
),
first_saved AS (
    SELECT w.seq AS request_seq,
           first_value(s.seq ORDER BY s.created_ns, s.seq) AS saved_seq,
           first_value(s.id ORDER BY s.created_ns, s.seq) AS saved_id,
           first_value(s.created_ns ORDER BY s.created_ns, s.seq) AS saved_ns,
           first_value(s.created_at ORDER BY s.created_ns, s.seq) AS saved_at,
           first_value(coalesce(s.checkpoint_id, s.p_checkpoint_id) ORDER BY s.created_ns, s.seq) AS saved_checkpoint_id
    FROM windows w
    JOIN ev s ON s.task_key = w.task_key AND s.type = 'interruption.saved'
    WHERE coalesce(s.checkpoint_id, s.p_checkpoint_id) IS NOT NULL
      AND (s.created_ns > w.created_ns OR (s.created_ns = w.created_ns AND s.seq > w.seq))
      AND (w.close_seq IS NULL OR s.created_ns < w.close_ns
           OR (s.created_ns = w.close_ns AND s.seq < w.close_seq))
    GROUP BY w.seq
)
SELECT w.*, f.saved_seq, f.saved_id, f.saved_ns, f.saved_at, f.saved_checkpoint_id
FROM windows w
LEFT JOIN first_saved f ON f.request_seq = w.seq
