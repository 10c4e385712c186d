-- id: token.replayed
-- severity: critical
-- family: token
-- dialect: any
-- summary: one handoff token (or, for a structured token, one jti) issued on more than one delegation.handoff.completed
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
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
                ELSE concat('value:', u.token) END AS replay_key,
           time_order(u.created_ns, u.seq) AS ord
    FROM token_uses u
    WHERE u.is_issue
),
first_issue AS (
    -- the first issuance (time, then input order) of every key issued twice
    SELECT replay_key, seq_of(min(ord)) AS first_seq
    FROM issues
    GROUP BY replay_key
    HAVING count(*) > 1
),
ranked AS (
    -- every later issuance, with the first one's fields
    SELECT i.*, f.first_seq,
           o.id AS first_id, o.task_id AS first_task_id, o.token AS first_token,
           o.token_label AS first_token_label, o.created_at AS first_at
    FROM issues i
    JOIN first_issue f ON f.replay_key = i.replay_key
    JOIN token_uses o ON o.seq = f.first_seq
    WHERE i.seq <> f.first_seq
)
SELECT
    r.task_id,
    concat('handoff token ', r.token_label,
           CASE WHEN r.token_jti IS NOT NULL THEN concat(' (jti ', log_value(r.token_jti), ')') ELSE '' END,
           ' issued again by ', log_value(r.id), ' at ', instant_text(r.created_at),
           ' for task ', log_value(coalesce(r.task_id, '(none)')), ' to ', log_value(coalesce(r.delegated_to, '(none)')),
           ': already issued by ', log_value(r.first_id), ' at ', instant_text(r.first_at),
           ' for task ', log_value(coalesce(r.first_task_id, '(none)')),
           CASE WHEN r.token <> r.first_token
                THEN concat(' as token ', r.first_token_label) ELSE '' END,
           '; expected a fresh token (and jti) for every handoff') AS message,
    make_array(r.seq, r.first_seq) AS seqs
FROM ranked r
