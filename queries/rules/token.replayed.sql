-- id: token.replayed
-- severity: critical
-- family: token
-- dialect: any
-- summary: one handoff token (or, for a structured token, one jti) issued on more than one delegation.handoff.completed
-- spec: RULES.md "Reused handoff tokens"; SPEC-NOTES.md §5
-- explain:
--   A handoff token is issued once, on one delegation.handoff.completed.
--   Fires for every issuing event after the first that carries the same
--   token value -- or, under --token-format structured, the same decoded
--   jti claim, even when the token values differ. Events are distinct ids:
--   an exact redelivery of the issuing event is collapsed at ingest and is
--   never a replay. Opaque tokens (the default) are compared by value only.
--   The finding names the re-issuing event first, then the first issuance.
--   Example: evt_4 and evt_9, both delegation.handoff.completed with
--   handoff_token ht_1: fires on evt_9. evt_4 logged twice with identical
--   content: silent.
WITH issues AS (
    SELECT u.*,
           -- structured tokens are identified by jti, opaque ones by value
           CASE WHEN u.token_jti IS NOT NULL THEN concat('jti:', u.token_jti)
                ELSE concat('value:', u.token) END AS replay_key
    FROM token_uses u
    WHERE u.is_issue
),
ranked AS (
    SELECT i.*,
           row_number() OVER w AS n,
           first_value(i.seq) OVER w AS first_seq,
           first_value(i.id) OVER w AS first_id,
           first_value(i.task_id) OVER w AS first_task_id,
           first_value(i.token) OVER w AS first_token,
           first_value(i.token_label) OVER w AS first_token_label,
           first_value(i.created_at) OVER w AS first_at
    FROM issues i
    WINDOW w AS (PARTITION BY i.replay_key ORDER BY i.created_us, i.seq)
)
SELECT
    r.task_id,
    concat('handoff token ', r.token_label,
           CASE WHEN r.token_jti IS NOT NULL THEN concat(' (jti ', r.token_jti, ')') ELSE '' END,
           ' issued again by ', r.id, ' at ', to_char(arrow_cast(r.created_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
           ' for task ', coalesce(r.task_id, '(none)'), ' to ', coalesce(r.delegated_to, '(none)'),
           ': already issued by ', r.first_id, ' at ', to_char(arrow_cast(r.first_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
           ' for task ', coalesce(r.first_task_id, '(none)'),
           CASE WHEN r.token <> r.first_token
                THEN concat(' as token ', r.first_token_label) ELSE '' END,
           '; expected a fresh token (and jti) for every handoff') AS message,
    make_array(r.seq, r.first_seq) AS seqs
FROM ranked r
WHERE r.n > 1
