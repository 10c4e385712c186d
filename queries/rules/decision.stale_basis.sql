-- id: decision.stale_basis
-- severity: medium
-- family: decision
-- dialect: any
-- summary: a decision rests on a basis event whose validity had already ended
-- spec: docs/protocol.md §7 (decisions and provenance)
-- explain:
--   Basis = the event named by the decision's causation_id plus the events
--   named in its evidence_chain (see decision.unverified_basis for the
--   decision set). A basis event's validity ends at its staleness point,
--   min(valid_until, created_at + stale_after) (stale_after an ISO 8601
--   duration; computed at ingest as stale_at). Fires when that point is
--   strictly before the decision's created_at, to the nanosecond (stale_at_ns,
--   created_ns); a basis that goes stale at
--   the decision's very instant, or has neither field, is fine. One finding
--   per (decision, stale basis event).
--   Example: context.snapshot.ready evt_1 at 12:00:00 with stale_after PT30S,
--   then tool.call.requested evt_2 at 12:01:00 with causation_id evt_1 fires
--   (stale since 12:00:30); at 12:00:30 it is silent.
SELECT d_task_id AS task_id,
       concat(log_value(d_type), ' ', log_value(d_id),
              CASE WHEN d_task_id IS NULL THEN '' ELSE concat(' of task ', log_value(d_task_id)) END,
              ' at ', instant_text(d_created_at),
              ' rests on ', log_value(ref_id), ' (', log_value(b_type), ', via ', via, ', created ',
              instant_text(b_created_at),
              CASE WHEN b_valid_until IS NOT NULL
                   THEN concat(', valid_until ', instant_text(b_valid_until))
                   ELSE '' END,
              CASE WHEN b_stale_after IS NOT NULL
                   THEN concat(', stale_after ', b_stale_after) ELSE '' END,
              '), which went stale at ', instant_text(b_stale_at),
              '; expected a basis still valid when the decision was taken (refresh it first)') AS message,
       make_array(d_seq, b_seq) AS seqs
FROM decision_basis
WHERE b_seq IS NOT NULL
  AND b_stale_at IS NOT NULL
  AND b_stale_at_ns < d_created_ns
