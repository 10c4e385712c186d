-- materialize: true
-- One row per task (every task_id on a first-version event), the facts the
-- orphan, parent, checkpoint and lifecycle rules share. "First" is always by
-- (created_us, seq): time order, ties in input order.
--   parent_task_id  the first parent link seen on the task's events (a second,
--                   different one is lifecycle.conflicting_parent)
--   dialect         the dialect of the task's first event, or --spec when set;
--                   log_dialect is the first event's own
--   first_*         the task's first event of any type
--   state_*         its first task.* event other than task.cancel.requested
--                   (a request, not a state)
--   deleg_*         its first delegation.accepted / delegation.handoff.completed
--   active_*        when it became active (RULES.md "Active"): the earlier of
--                   state_* and deleg_*; null = never active (e.g. a delegation
--                   that was only requested, then rejected)
--   term_*          its first terminal event (completed, failed, cancelled,
--                   timed_out); anything after it is an illegal transition
WITH per_task AS (
    SELECT
        task_id,
        first_value(parent_task_id ORDER BY created_us, seq)
            FILTER (WHERE parent_task_id IS NOT NULL) AS parent_task_id,
        first_value(session_id ORDER BY created_us, seq)
            FILTER (WHERE session_id IS NOT NULL) AS session_id,
        first_value(dialect ORDER BY created_us, seq) AS log_dialect,
        first_value(seq ORDER BY created_us, seq) AS first_seq,
        first_value(created_us ORDER BY created_us, seq) AS first_us,
        first_value(created_at ORDER BY created_us, seq) AS first_at,
        first_value(type ORDER BY created_us, seq) AS first_type,
        first_value(seq ORDER BY created_us, seq)
            FILTER (WHERE type LIKE 'task.%' AND type <> 'task.cancel.requested') AS state_seq,
        first_value(created_us ORDER BY created_us, seq)
            FILTER (WHERE type LIKE 'task.%' AND type <> 'task.cancel.requested') AS state_us,
        first_value(created_at ORDER BY created_us, seq)
            FILTER (WHERE type LIKE 'task.%' AND type <> 'task.cancel.requested') AS state_at,
        first_value(type ORDER BY created_us, seq)
            FILTER (WHERE type LIKE 'task.%' AND type <> 'task.cancel.requested') AS state_type,
        first_value(seq ORDER BY created_us, seq)
            FILTER (WHERE type IN ('delegation.accepted', 'delegation.handoff.completed')) AS deleg_seq,
        first_value(created_us ORDER BY created_us, seq)
            FILTER (WHERE type IN ('delegation.accepted', 'delegation.handoff.completed')) AS deleg_us,
        first_value(created_at ORDER BY created_us, seq)
            FILTER (WHERE type IN ('delegation.accepted', 'delegation.handoff.completed')) AS deleg_at,
        first_value(type ORDER BY created_us, seq)
            FILTER (WHERE type IN ('delegation.accepted', 'delegation.handoff.completed')) AS deleg_type,
        first_value(seq ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_seq,
        first_value(created_us ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_us,
        first_value(created_at ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_at,
        first_value(type ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_type,
        first_value(id ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_id,
        first_value(causation_id ORDER BY created_us, seq)
            FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_causation_id
    FROM ev
    WHERE task_id IS NOT NULL
    GROUP BY task_id
),
with_active AS (
    SELECT *,
        -- the task.* event activates unless a delegation acceptance came first
        (deleg_seq IS NULL OR (state_seq IS NOT NULL
            AND (state_us < deleg_us OR (state_us = deleg_us AND state_seq < deleg_seq))))
            AS state_first
    FROM per_task
)
SELECT
    t.task_id,
    t.parent_task_id,
    coalesce(s.spec_override, t.log_dialect) AS dialect,
    t.log_dialect,
    t.session_id,
    t.first_seq, t.first_us, t.first_at, t.first_type,
    t.state_seq, t.state_us, t.state_at, t.state_type,
    t.deleg_seq, t.deleg_us, t.deleg_at, t.deleg_type,
    CASE WHEN t.state_first THEN t.state_seq ELSE t.deleg_seq END AS active_seq,
    CASE WHEN t.state_first THEN t.state_us ELSE t.deleg_us END AS active_us,
    CASE WHEN t.state_first THEN t.state_at ELSE t.deleg_at END AS active_at,
    CASE WHEN t.state_first THEN t.state_type ELSE t.deleg_type END AS active_type,
    t.term_seq, t.term_us, t.term_at, t.term_type,
    t.term_id, t.term_causation_id
FROM with_active t
CROSS JOIN settings s
