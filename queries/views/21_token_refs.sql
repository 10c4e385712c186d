-- materialize: true
-- One row per token value: the binding it was issued for. The reference is
-- its first issuing event (delegation.handoff.completed), or its first
-- appearance when the input holds no issuing event for it; each binding field
-- (delegated_by, delegated_to, task_id, parent_task_id) is the first non-null
-- value in that same order, so a field the reference event lacks is taken
-- from the next event that has it.
-- (Speed: "first in that order" is min() of one sortable number per event,
-- (0 for issuing events, else 2) * 10^37 + (created_us + 10^18) * 10^19 + seq,
-- see 10_tasks.sql; the chosen events are then fetched by seq in one join.)
WITH keyed AS (
    SELECT token, token_label, is_issue, task_id, parent_task_id, delegated_by,
           delegated_to, token_error,
           CAST(CASE WHEN is_issue THEN '0' ELSE '20000000000000000000000000000000000000' END AS DECIMAL(38, 0))
           + CAST(created_us + 1000000000000000000 AS DECIMAL(38, 0)) * 10000000000000000000 + seq AS ord
    FROM token_uses
),
firsts AS (
    SELECT token,
           -- a function of the token: every row has the same
           min(token_label) AS token_label,
           sum(CASE WHEN is_issue THEN 1 ELSE 0 END) AS n_issues,
           min(ord) AS ref_ord,
           min(ord) FILTER (WHERE task_id IS NOT NULL) AS task_ord,
           min(ord) FILTER (WHERE parent_task_id IS NOT NULL) AS parent_ord,
           min(ord) FILTER (WHERE delegated_by IS NOT NULL) AS by_ord,
           min(ord) FILTER (WHERE delegated_to IS NOT NULL) AS to_ord,
           min(ord) FILTER (WHERE token_error IS NOT NULL) AS error_ord
    FROM keyed
    GROUP BY token
),
picks AS (
    -- kind 1 the reference event, 2..6 the first with each field
    SELECT token, token_label, n_issues,
           unnest(make_array(
               CAST(ref_ord % 10000000000000000000 AS BIGINT), CAST(task_ord % 10000000000000000000 AS BIGINT),
               CAST(parent_ord % 10000000000000000000 AS BIGINT), CAST(by_ord % 10000000000000000000 AS BIGINT),
               CAST(to_ord % 10000000000000000000 AS BIGINT), CAST(error_ord % 10000000000000000000 AS BIGINT))) AS seq,
           unnest(make_array(1, 2, 3, 4, 5, 6)) AS kind
    FROM firsts
)
SELECT
    p.token,
    p.token_label,
    p.n_issues,
    max(CASE WHEN p.kind = 1 THEN u.seq END) AS ref_seq,
    max(CASE WHEN p.kind = 1 THEN u.id END) AS ref_id,
    max(CASE WHEN p.kind = 1 THEN u.type END) AS ref_type,
    max(CASE WHEN p.kind = 1 THEN u.is_issue END) AS ref_is_issue,
    max(CASE WHEN p.kind = 1 THEN u.created_us END) AS ref_us,
    max(CASE WHEN p.kind = 1 THEN u.created_at END) AS ref_at,
    max(CASE WHEN p.kind = 2 THEN u.task_id END) AS ref_task_id,
    max(CASE WHEN p.kind = 3 THEN u.parent_task_id END) AS ref_parent_task_id,
    max(CASE WHEN p.kind = 4 THEN u.delegated_by END) AS ref_delegated_by,
    max(CASE WHEN p.kind = 5 THEN u.delegated_to END) AS ref_delegated_to,
    max(CASE WHEN p.kind = 6 THEN u.token_error END) AS token_error
FROM picks p
JOIN token_uses u ON u.seq = p.seq
GROUP BY p.token, p.token_label, p.n_issues
