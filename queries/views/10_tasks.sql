-- materialize: true
-- One row per task (every task_id on a first-version event), the facts the
-- orphan, parent, checkpoint and lifecycle rules share; task_key and
-- parent_key are its id's and its parent's keys (01_ev.sql), for joins. "First" is always by
-- (created_ns, seq): time order, ties in input order.
--   parent_task_id  the first parent link seen on the task's events (a second,
--                   different one is lifecycle.conflicting_parent)
--   dialect         the dialect of the task's first event, or --spec when set;
--                   log_dialect is the first event's own
--   first_*         the task's first event of any type
--   state_*         its first task.* event other than task.cancel.requested
--                   (a request, not a state)
--   deleg_*         its first delegation.accepted / delegation.handoff.completed
--   active_*        when it became active (docs/protocol.md §9.6): the earlier of
--                   state_* and deleg_*; null = never active (e.g. a delegation
--                   that was only requested, then rejected)
--   term_*          its first terminal event (completed, failed, cancelled,
--                   timed_out); anything after it is an illegal transition
-- Speed: "first by (created_ns, seq)" is min() of time_order(created_ns,
-- seq), one sortable number that carries the seq (queries/README.md). The
-- six first events of a task are then fetched by seq (unique) in one join
-- and pivoted back. (In the engine, first_value(x ORDER BY ...) per group
-- costs time in the number of groups on every batch; one join, not six,
-- keeps cluster plans small.) An audit of a loaded log computes this view in
-- Rust instead, in one pass (src/rules/tasks_view.rs); tests/tasks_view.rs
-- holds it to the rows of this query.
WITH keyed AS (
    SELECT task_key, parent_task_id, session_id, type,
           time_order(created_ns, seq) AS ord
    FROM ev
    WHERE task_key IS NOT NULL
),
firsts AS (
    SELECT
        task_key,
        min(ord) FILTER (WHERE parent_task_id IS NOT NULL) AS parent_ord,
        min(ord) FILTER (WHERE session_id IS NOT NULL) AS session_ord,
        min(ord) AS first_ord,
        min(ord) FILTER (WHERE type LIKE 'task.%' AND type <> 'task.cancel.requested') AS state_ord,
        min(ord) FILTER (WHERE type IN ('delegation.accepted', 'delegation.handoff.completed')) AS deleg_ord,
        min(ord) FILTER (WHERE type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.timed_out')) AS term_ord
    FROM keyed
    GROUP BY task_key
),
picks AS (
    -- one row per (task, kind of first event); kind 1 parent link,
    -- 2 session, 3 first event, 4 state, 5 delegation, 6 terminal
    SELECT task_key,
           unnest(make_array(seq_of(parent_ord), seq_of(session_ord), seq_of(first_ord),
                             seq_of(state_ord), seq_of(deleg_ord), seq_of(term_ord))) AS seq,
           unnest(make_array(1, 2, 3, 4, 5, 6)) AS kind
    FROM firsts
),
per_task AS (
    SELECT p.task_key,
           max(CASE WHEN p.kind = 3 THEN e.task_id END) AS task_id,
           max(CASE WHEN p.kind = 1 THEN e.parent_task_id END) AS parent_task_id,
           max(CASE WHEN p.kind = 1 THEN e.parent_key END) AS parent_key,
           max(CASE WHEN p.kind = 2 THEN e.session_id END) AS session_id,
           max(CASE WHEN p.kind = 3 THEN e.dialect END) AS log_dialect,
           max(CASE WHEN p.kind = 3 THEN e.seq END) AS first_seq,
           max(CASE WHEN p.kind = 3 THEN e.created_ns END) AS first_ns,
           max(CASE WHEN p.kind = 3 THEN e.created_at END) AS first_at,
           max(CASE WHEN p.kind = 3 THEN e.type END) AS first_type,
           max(CASE WHEN p.kind = 4 THEN e.seq END) AS state_seq,
           max(CASE WHEN p.kind = 4 THEN e.created_ns END) AS state_ns,
           max(CASE WHEN p.kind = 4 THEN e.created_at END) AS state_at,
           max(CASE WHEN p.kind = 4 THEN e.type END) AS state_type,
           max(CASE WHEN p.kind = 5 THEN e.seq END) AS deleg_seq,
           max(CASE WHEN p.kind = 5 THEN e.created_ns END) AS deleg_ns,
           max(CASE WHEN p.kind = 5 THEN e.created_at END) AS deleg_at,
           max(CASE WHEN p.kind = 5 THEN e.type END) AS deleg_type,
           max(CASE WHEN p.kind = 6 THEN e.seq END) AS term_seq,
           max(CASE WHEN p.kind = 6 THEN e.created_ns END) AS term_ns,
           max(CASE WHEN p.kind = 6 THEN e.created_at END) AS term_at,
           max(CASE WHEN p.kind = 6 THEN e.type END) AS term_type,
           max(CASE WHEN p.kind = 6 THEN e.id END) AS term_id,
           max(CASE WHEN p.kind = 6 THEN e.causation_id END) AS term_causation_id
    FROM picks p
    JOIN ev e ON e.seq = p.seq
    GROUP BY p.task_key
),
with_active AS (
    SELECT *,
        -- the task.* event activates unless a delegation acceptance came first
        (deleg_seq IS NULL OR (state_seq IS NOT NULL
            AND (state_ns < deleg_ns OR (state_ns = deleg_ns AND state_seq < deleg_seq))))
            AS state_first
    FROM per_task
)
SELECT
    t.task_key,
    t.task_id,
    t.parent_key,
    t.parent_task_id,
    coalesce(s.spec_override, t.log_dialect) AS dialect,
    t.log_dialect,
    t.session_id,
    t.first_seq, t.first_ns, t.first_at, t.first_type,
    t.state_seq, t.state_ns, t.state_at, t.state_type,
    t.deleg_seq, t.deleg_ns, t.deleg_at, t.deleg_type,
    CASE WHEN t.state_first THEN t.state_seq ELSE t.deleg_seq END AS active_seq,
    CASE WHEN t.state_first THEN t.state_ns ELSE t.deleg_ns END AS active_ns,
    CASE WHEN t.state_first THEN t.state_at ELSE t.deleg_at END AS active_at,
    CASE WHEN t.state_first THEN t.state_type ELSE t.deleg_type END AS active_type,
    t.term_seq, t.term_ns, t.term_at, t.term_type,
    t.term_id, t.term_causation_id
FROM settings s
CROSS JOIN with_active t
