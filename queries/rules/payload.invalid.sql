-- id: payload.invalid
-- severity: low
-- family: payload
-- dialect: any
-- summary: a known event type whose payload breaks the payload schema
-- spec: docs/protocol.md §8 (payload schemas)
-- explain:
--   The shared payload schema (harmovela-payloads.schema.json) validates 26
--   types (context, memory, belief, freshness, delegation, interruption,
--   compensation, provenance): the payload must be an object with the listed
--   required fields, of the listed types. The ingest validates each event of
--   such a type and keeps the first violation; fires once per event with a
--   violation, naming it. Types without a payload schema (task, tool,
--   command, query, session, ...) and unknown types are never checked.
--   Example: context.invalidated with payload {} fires (context_key is
--   required); with {"context_key":"k"} it is silent.
SELECT e.task_id,
       concat(log_value(e.type), ' ', log_value(e.id), ' at ', instant_text(e.created_at),
              ' has a payload that breaks the ', log_value(e.type), ' payload schema: ', e.payload_error) AS message,
       make_array(e.seq) AS seqs
FROM ev e
WHERE e.payload_error IS NOT NULL
