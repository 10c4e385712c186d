-- materialize: true
-- Parent/child pairs: every distinct (task_id, parent_task_id) carried by a
-- first-version event (envelope, payload or delegation.* link), with both
-- tasks' facts from `tasks`. A child naming two parents appears under both
-- (that conflict itself is lifecycle.conflicting_parent); a self-link is
-- dropped. child_key and parent_key are the two ids' keys (01_ev.sql).
-- p_known is false when the parent appears nowhere as a task_id.
--   link_*                   the first event carrying this link
--   active_at_parent_end     the child is active at the parent's terminal
--                            event: it became active before it (time, then
--                            input order) and has no terminal event before or
--                            at it. Null/false when the parent never ends.
WITH first_link AS (
    SELECT task_key AS child_key, parent_key, min(time_order(created_ns, seq)) AS ord
    FROM ev
    WHERE task_key IS NOT NULL AND parent_key IS NOT NULL
      AND task_key <> parent_key
    GROUP BY task_key, parent_key
),
links AS (
    SELECT l.child_key, l.parent_key, e.task_id AS child_id, e.parent_task_id AS parent_id,
           e.seq AS link_seq, e.created_at AS link_at, e.type AS link_type
    FROM first_link l
    JOIN ev e ON e.seq = seq_of(l.ord)
)
SELECT
    l.child_key, l.parent_key, l.child_id, l.parent_id, l.link_seq, l.link_at, l.link_type,
    c.dialect AS c_dialect,
    c.active_seq AS c_active_seq, c.active_ns AS c_active_ns,
    c.active_at AS c_active_at, c.active_type AS c_active_type,
    c.term_seq AS c_term_seq, c.term_ns AS c_term_ns, c.term_at AS c_term_at,
    c.term_type AS c_term_type, c.term_id AS c_term_id,
    c.term_causation_id AS c_term_causation_id,
    p.task_id IS NOT NULL AS p_known,
    p.dialect AS p_dialect,
    p.term_seq AS p_term_seq, p.term_ns AS p_term_ns, p.term_at AS p_term_at,
    p.term_type AS p_term_type, p.term_id AS p_term_id,
    (p.term_seq IS NOT NULL
     AND c.active_seq IS NOT NULL
     AND (c.active_ns < p.term_ns OR (c.active_ns = p.term_ns AND c.active_seq < p.term_seq))
     AND (c.term_seq IS NULL
          OR c.term_ns > p.term_ns OR (c.term_ns = p.term_ns AND c.term_seq > p.term_seq)))
        AS active_at_parent_end
FROM links l
JOIN tasks c ON c.task_key = l.child_key
LEFT JOIN tasks p ON p.task_key = l.parent_key
