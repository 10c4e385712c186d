-- id: token.claims_invalid
-- severity: high
-- family: token
-- dialect: any
-- summary: a decoded handoff token's claims fail a check (issuer, subject, task, parent, expiry, issued-at)
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   Only under --token-format structured (tokens are opaque by default and
--   the spec forbids parsing them). Each decoded token is checked on the
--   issuing event and on every event presenting it; one finding per event
--   and failed check, naming the check:
--     iss        the iss claim differs from the event's delegated_by
--     sub        the sub claim differs from the event's delegated_to
--     task_id    the task_id claim differs from the event's task_id
--     parent     the parent_task_id claim differs from the event's
--                parent_task_id (envelope, else payload)
--     no exp     the token has no exp claim (MUST be rejected)
--     expired    exp is at or before the event's created_at
--     iat        iat is more than 60 s after the event's created_at
--   (Times compare to the nanosecond; claims given in seconds are read to
--   the microsecond.)
--   The four binding checks run only where the event carries the field (a
--   presenting event without delegated_by is not checked for iss); a
--   missing claim against a present field fails. Tokens that do not decode
--   are token.undecodable instead.
--   Example: handoff.completed at 10:00:00 delegated_to agent:worker with a
--   token {sub: agent:other, exp: 09:59:00, ...}: two findings, sub and
--   expired. The same token with sub agent:worker and exp 11:00: silent.
WITH decoded AS (
    SELECT u.*
    FROM token_uses u
    CROSS JOIN settings s
    WHERE s.token_format = 'structured' AND u.token_structured
),
failed AS (
    SELECT seq, 'iss' AS check_name,
           concat('iss claim ', log_value(coalesce(token_iss, '(missing)')), ' is not delegated_by ', log_value(delegated_by)) AS detail
    FROM decoded WHERE delegated_by IS NOT NULL AND token_iss IS DISTINCT FROM delegated_by
    UNION ALL
    SELECT seq, 'sub',
           concat('sub claim ', log_value(coalesce(token_sub, '(missing)')), ' is not delegated_to ', log_value(delegated_to))
    FROM decoded WHERE delegated_to IS NOT NULL AND token_sub IS DISTINCT FROM delegated_to
    UNION ALL
    SELECT seq, 'task_id',
           concat('task_id claim ', log_value(coalesce(token_task_id, '(missing)')), ' is not the event''s task_id ', log_value(task_id))
    FROM decoded WHERE task_id IS NOT NULL AND token_task_id IS DISTINCT FROM task_id
    UNION ALL
    SELECT seq, 'parent_task_id',
           concat('parent_task_id claim ', log_value(coalesce(token_parent_task_id, '(missing)')),
                  ' is not the event''s parent_task_id ', log_value(parent_task_id))
    FROM decoded WHERE parent_task_id IS NOT NULL AND token_parent_task_id IS DISTINCT FROM parent_task_id
    UNION ALL
    SELECT seq, 'expiry', 'no exp claim (tokens without expiry must be rejected)'
    FROM decoded WHERE token_exp IS NULL
    UNION ALL
    SELECT seq, 'exp',
           concat('expired: exp ', instant_text(token_exp),
                  ' is at or before the event''s created_at')
    FROM decoded WHERE token_exp_ns <= created_ns
    UNION ALL
    SELECT seq, 'iat',
           concat('iat ', instant_text(token_iat),
                  ' is more than 60 s after the event''s created_at')
    -- a decimal: an iat near the end of int64 nanoseconds plus 60 s wraps
    FROM decoded WHERE CAST(token_iat_ns AS DECIMAL(38, 0)) - created_ns > 60000000000
)
SELECT
    d.task_id,
    concat('handoff token ', d.token_label, ' on ', log_value(d.type), ' ', log_value(d.id), ' at ',
           instant_text(d.created_at), ' fails the ', f.check_name, ' check: ',
           f.detail, '; expected claims matching the delegation and a valid time window') AS message,
    make_array(d.seq) AS seqs
FROM failed f
JOIN decoded d ON d.seq = f.seq
