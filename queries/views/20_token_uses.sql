-- materialize: true
-- (Materialized: token_refs and the token.* rules read it eight times; each
-- read would otherwise scan every event again for the few with a token.)
-- Every first-version event that carries a handoff_token: the issuing
-- delegation.handoff.completed events (is_issue) and the events presenting it,
-- with the event's own binding fields and the decoded claims (token_* columns
-- are filled only under --token-format structured).
-- token_label is what messages show: tokens are bearer credentials, so only
-- a prefix of a long value is repeated in reports (the event ids locate it).
SELECT seq, id, type, task_id, parent_task_id, delegated_by, delegated_to,
       handoff_token AS token,
       CASE WHEN character_length(handoff_token) > 12
            THEN concat(left(handoff_token, 8), '…')
            ELSE handoff_token END AS token_label,
       type = 'delegation.handoff.completed' AS is_issue,
       created_ns, created_at,
       token_structured, token_error, token_iss, token_sub, token_task_id,
       token_parent_task_id, token_iat, token_exp, token_iat_ns, token_exp_ns, token_jti
FROM ev
WHERE handoff_token IS NOT NULL
