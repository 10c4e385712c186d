-- id: token.undecodable
-- severity: low
-- family: token
-- dialect: any
-- summary: under --token-format structured, a handoff token value does not decode as claims
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   Only under --token-format structured, where the user says the runtime's
--   tokens are a base64url JSON object of claims, alone or as the middle of
--   three '.'-joined segments. A token value that does not decode that way
--   is reported once per distinct value, naming its issuing
--   delegation.handoff.completed (or its first appearance when the input has
--   no issuing event) and the decoder's reason; it is never guessed at, and
--   its claims are not checked (token.claims_invalid).
--   Example: handoff_token "ht_abc123" under the structured option: one
--   finding on its issuing event. The same log audited with opaque tokens
--   (the default): silent.
SELECT
    r.ref_task_id AS task_id,
    concat('handoff token ', r.token_label,
           CASE WHEN r.ref_is_issue THEN ' issued by ' ELSE ' first seen on ' END,
           log_value(r.ref_type), ' ', log_value(r.ref_id), ' at ', instant_text(r.ref_at),
           ' does not decode as structured claims: ', r.token_error,
           '; expected base64url JSON claims, alone or as the middle of three ''.''-joined segments',
           ' (or audit with --token-format opaque)') AS message,
    make_array(r.ref_seq) AS seqs
FROM token_refs r
CROSS JOIN settings s
WHERE s.token_format = 'structured' AND r.token_error IS NOT NULL
