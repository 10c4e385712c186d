-- materialize: true
-- The lifecycle events of tasks (the ten task.* states; not
-- task.cancel.requested, not unknown task.* types) whose step from the
-- lifecycle event before it (time, then input order) is illegal or skips
-- task.accepted: what lifecycle.illegal_transition and
-- lifecycle.skipped_accept report. Every step is checked; only these few are
-- kept. A task delegated to its worker -- delegation.accepted or
-- delegation.handoff.completed before its first lifecycle event -- counts as
-- submitted + accepted: its first event follows a virtual task.accepted
-- (from_seq = that delegation event), unless that first event is
-- task.submitted itself (a worker starting the table from the beginning is
-- legal too).
--   from_type  the previous state, '(none)' for a task's first event
--   from_label, from_at  how the previous state shows in messages
--   legal      the lifecycle table allows from_type -> type
--   skipped_accept  task.submitted -> task.started (lifecycle.skipped_accept)
-- An audit of a loaded log computes this view in Rust instead, in one pass
-- (src/rules/transitions_view.rs); tests/tasks_view.rs holds it to the rows
-- of this query.
WITH ordered AS (
    -- one window over all tasks in (task, time, input order); the previous
    -- row is the task's previous lifecycle event when it has the same key
    -- (faster than PARTITION BY task_key, whose cost grows with the number
    -- of tasks in every batch)
    SELECT seq, task_key, type, created_ns,
           lag(task_key) OVER w AS lag_task_key,
           lag(type) OVER w AS lag_type,
           lag(seq) OVER w AS lag_seq
    FROM ev
    WHERE task_key IS NOT NULL
      AND type IN ('task.submitted', 'task.accepted', 'task.started', 'task.progress',
                   'task.output', 'task.blocked', 'task.completed', 'task.failed',
                   'task.cancelled', 'task.timed_out')
    WINDOW w AS (ORDER BY task_key, created_ns, seq)
),
states AS (
    SELECT seq, task_key, type, created_ns,
           CASE WHEN lag_task_key = task_key THEN lag_type END AS prev_type,
           CASE WHEN lag_task_key = task_key THEN lag_seq END AS prev_seq
    FROM ordered
),
with_from AS (
    SELECT s.*,
           -- the first lifecycle event of a task delegated before it (unless
           -- the worker still starts the table at task.submitted)
           (t.deleg_seq IS NOT NULL
            AND (t.deleg_ns < s.created_ns OR (t.deleg_ns = s.created_ns AND t.deleg_seq < s.seq)))
               AS after_delegation,
           t.deleg_seq, t.deleg_type, t.deleg_at
    FROM states s
    -- only such a first event looks up its task (the others join on a null
    -- key), and only delegated tasks are looked up: a small build side the
    -- engine can share, instead of repartitioning every lifecycle event
    LEFT JOIN (SELECT task_key, deleg_seq, deleg_ns, deleg_type, deleg_at
               FROM tasks WHERE deleg_seq IS NOT NULL) t
           ON t.task_key = CASE WHEN s.prev_type IS NULL AND s.type <> 'task.submitted'
                                THEN s.task_key END
),
checked AS (
    SELECT w.*,
           n.to_type IS NOT NULL AS legal,
           coalesce(w.prev_type = 'task.submitted' AND w.type = 'task.started', false) AS skipped_accept
    FROM with_from w
    LEFT JOIN lifecycle_next n
           ON n.from_type = CASE WHEN w.after_delegation THEN 'task.accepted'
                                 ELSE coalesce(w.prev_type, '(none)') END
          AND n.to_type = w.type
)
SELECT
    w.seq, c.id, c.task_id, w.task_key, w.type, w.created_ns, c.created_at,
    CASE WHEN w.after_delegation THEN 'task.accepted' ELSE coalesce(w.prev_type, '(none)') END AS from_type,
    CASE WHEN w.after_delegation THEN w.deleg_seq ELSE w.prev_seq END AS from_seq,
    CASE WHEN w.after_delegation THEN concat(log_value(w.deleg_type), ' (counts as submitted + accepted)')
         WHEN w.prev_type IS NULL THEN NULL
         ELSE concat(log_value(w.prev_type), ' ', log_value(p.id)) END AS from_label,
    CASE WHEN w.after_delegation THEN w.deleg_at ELSE p.created_at END AS from_at,
    w.legal,
    w.skipped_accept
FROM checked w
-- the event's and the previous event's id and time (and the task id), looked
-- up for the kept rows only: a join of these few costs less than carrying
-- the text through the sort and the window of every lifecycle event
LEFT JOIN ev p ON p.seq = CASE WHEN w.after_delegation THEN NULL ELSE w.prev_seq END
JOIN ev c ON c.seq = w.seq
WHERE NOT w.legal OR w.skipped_accept
