-- id: subscription.no_filter
-- severity: medium
-- family: subscription
-- dialect: any
-- summary: subscription.requested with none of the filters types, source, target, topic
-- spec: docs/protocol.md §10 (the protocol's fixtures)
-- rows: type subscription.requested
-- explain:
--   A subscription.requested must narrow what it receives: fires when its
--   payload (payload.X or payload.filter.X) has none of types, source,
--   target, topic. A filter field that is null, an empty string, an empty
--   array or an empty object filters nothing and counts as absent. The
--   envelope target (the harness the request is addressed to) is not a
--   filter; session_id, conversation_id or task_id alone do not count
--   either (the rule names exactly the four fields).
--   Example: payload {} fires; payload {"types":["task.*"]} is silent.
SELECT e.task_id,
       concat('subscription.requested ', log_value(e.id), ' from ', log_value(e.source), ' at ', instant_text(e.created_at),
              ' has no filter (payload ',
              CASE WHEN character_length(e.payload) > 200
                   THEN concat(left(e.payload, 200), '...') ELSE e.payload END,
              '); expected at least one of types, source, target, topic') AS message,
       make_array(e.seq) AS seqs
FROM ev e
WHERE e.type = 'subscription.requested'
  -- absent, JSON null or empty (white space aside) filters nothing
  AND regexp_like(coalesce(e.filter_types, 'null'), '^\s*(null|""|\[\s*\]|\{\s*\})\s*$')
  AND regexp_like(coalesce(e.filter_source, 'null'), '^\s*(null|""|\[\s*\]|\{\s*\})\s*$')
  AND regexp_like(coalesce(e.filter_target, 'null'), '^\s*(null|""|\[\s*\]|\{\s*\})\s*$')
  AND regexp_like(coalesce(e.filter_topic, 'null'), '^\s*(null|""|\[\s*\]|\{\s*\})\s*$')
