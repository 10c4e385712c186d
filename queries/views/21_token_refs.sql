-- materialize: true
-- One row per token value: the binding it was issued for. The reference is
-- its first issuing event (delegation.handoff.completed), or its first
-- appearance when the input holds no issuing event for it; each binding field
-- (delegated_by, delegated_to, task_id, parent_task_id) is the first non-null
-- value in that same order, so a field the reference event lacks is taken
-- from the next event that has it.
-- (Speed: "first in that order" is min() of one sortable number per event,
-- (0 for issuing events, else 2) * 10^38 + time_order(created_ns, seq)
-- (queries/README.md: below 2 * 10^38); the reference event is then fetched
-- by seq. A binding field is one string, so its first value is taken in the
-- same aggregate: min() of that number as 39 zero-padded digits followed by
-- the value, whose order is the number's; the value is the text after the
-- 39 digits. No join and no pivot for them.)
WITH keyed AS (
    SELECT token, task_id, parent_task_id, delegated_by, delegated_to, token_error, is_issue,
           CAST(CASE WHEN is_issue THEN '0' ELSE '200000000000000000000000000000000000000' END AS DECIMAL(39, 0))
           + time_order(created_ns, seq) AS ord
    FROM token_uses
),
ord_keyed AS (
    SELECT *, lpad(CAST(ord AS VARCHAR), 39, '0') AS ord_text
    FROM keyed
),
firsts AS (
    SELECT token,
           sum(CASE WHEN is_issue THEN 1 ELSE 0 END) AS n_issues,
           min(ord) AS ref_ord,
           -- null values stay out (|| with null is null)
           min(ord_text || task_id) AS task_pick,
           min(ord_text || parent_task_id) AS parent_pick,
           min(ord_text || delegated_by) AS by_pick,
           min(ord_text || delegated_to) AS to_pick,
           min(ord_text || token_error) AS error_pick
    FROM ord_keyed
    GROUP BY token
)
SELECT
    f.token,
    -- a function of the token: the reference event's is every event's
    u.token_label,
    f.n_issues,
    u.seq AS ref_seq,
    u.id AS ref_id,
    u.type AS ref_type,
    u.is_issue AS ref_is_issue,
    u.created_ns AS ref_ns,
    u.created_at AS ref_at,
    substr(f.task_pick, 40) AS ref_task_id,
    substr(f.parent_pick, 40) AS ref_parent_task_id,
    substr(f.by_pick, 40) AS ref_delegated_by,
    substr(f.to_pick, 40) AS ref_delegated_to,
    substr(f.error_pick, 40) AS token_error
FROM firsts f
JOIN token_uses u ON u.seq = seq_of(f.ref_ord)
