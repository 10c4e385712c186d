-- id: token.superseded
-- severity: high
-- family: token
-- dialect: any
-- summary: a handoff token issued for a task before its delegation.escalated is presented after the escalation
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   delegation.escalated moves a delegation to a supervisor and supersedes
--   the token issued before it. Take each token's first issuing
--   delegation.handoff.completed (for task T) and the first
--   delegation.escalated for T after it; fires for every event carrying the
--   token after that escalation (time, then input order), whatever its type
--   -- a re-issuance of the same value after the escalation included.
--   Tokens first issued after the escalation are the new ones and fine.
--   Example: ht_1 issued for task_9 at 10:00, task_9 escalated at 10:05,
--   tool.call.requested presenting ht_1 at 10:06: fires on the tool call.
--   The same call at 10:04: silent.
WITH issued AS (
    SELECT token, token_label, ref_seq AS i_seq, ref_ns AS i_ns, ref_id AS i_id,
           ref_at AS i_at, ref_task_id AS task_id
    FROM token_refs
    WHERE ref_is_issue AND ref_task_id IS NOT NULL
),
first_escalation AS (
    SELECT i.token,
           first_value(e.seq ORDER BY e.created_ns, e.seq) AS e_seq,
           first_value(e.id ORDER BY e.created_ns, e.seq) AS e_id,
           first_value(e.created_ns ORDER BY e.created_ns, e.seq) AS e_ns,
           first_value(e.created_at ORDER BY e.created_ns, e.seq) AS e_at,
           first_value(e.delegated_to ORDER BY e.created_ns, e.seq) AS e_to
    FROM issued i
    JOIN ev e ON e.task_id = i.task_id AND e.type = 'delegation.escalated'
    WHERE e.created_ns > i.i_ns OR (e.created_ns = i.i_ns AND e.seq > i.i_seq)
    GROUP BY i.token
)
SELECT
    u.task_id,
    concat('handoff token ', i.token_label, ' presented on ', log_value(u.type), ' ', log_value(u.id), ' at ',
           instant_text(u.created_at), ' was superseded: issued by ', log_value(i.i_id),
           ' at ', instant_text(i.i_at), ' for task ', log_value(i.task_id),
           ', which was escalated', CASE WHEN x.e_to IS NULL THEN '' ELSE concat(' to ', log_value(x.e_to)) END,
           ' by ', log_value(x.e_id), ' at ', instant_text(x.e_at),
           '; expected the token issued after the escalation') AS message,
    make_array(u.seq, x.e_seq, i.i_seq) AS seqs
FROM first_escalation x
JOIN issued i ON i.token = x.token
JOIN token_uses u ON u.token = x.token
WHERE u.created_ns > x.e_ns OR (u.created_ns = x.e_ns AND u.seq > x.e_seq)
