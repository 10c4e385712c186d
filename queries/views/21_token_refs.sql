-- One row per token value: the binding it was issued for. The reference is
-- its first issuing event (delegation.handoff.completed), or its first
-- appearance when the input holds no issuing event for it; each binding field
-- (delegated_by, delegated_to, task_id, parent_task_id) is the first non-null
-- value in that same order, so a field the reference event lacks is taken
-- from the next event that has it.
SELECT
    token,
    first_value(token_label) AS token_label,
    sum(CASE WHEN is_issue THEN 1 ELSE 0 END) AS n_issues,
    first_value(seq ORDER BY NOT is_issue, created_us, seq) AS ref_seq,
    first_value(id ORDER BY NOT is_issue, created_us, seq) AS ref_id,
    first_value(type ORDER BY NOT is_issue, created_us, seq) AS ref_type,
    first_value(is_issue ORDER BY NOT is_issue, created_us, seq) AS ref_is_issue,
    first_value(created_us ORDER BY NOT is_issue, created_us, seq) AS ref_us,
    first_value(created_at ORDER BY NOT is_issue, created_us, seq) AS ref_at,
    first_value(task_id ORDER BY NOT is_issue, created_us, seq)
        FILTER (WHERE task_id IS NOT NULL) AS ref_task_id,
    first_value(parent_task_id ORDER BY NOT is_issue, created_us, seq)
        FILTER (WHERE parent_task_id IS NOT NULL) AS ref_parent_task_id,
    first_value(delegated_by ORDER BY NOT is_issue, created_us, seq)
        FILTER (WHERE delegated_by IS NOT NULL) AS ref_delegated_by,
    first_value(delegated_to ORDER BY NOT is_issue, created_us, seq)
        FILTER (WHERE delegated_to IS NOT NULL) AS ref_delegated_to,
    first_value(token_error ORDER BY NOT is_issue, created_us, seq)
        FILTER (WHERE token_error IS NOT NULL) AS token_error
FROM token_uses
GROUP BY token
