-- id: decision.retracted_basis
-- severity: high
-- family: decision
-- dialect: any
-- summary: a decision rests on a basis event that was retracted before it
-- spec: docs/protocol.md §7 (decisions and provenance)
-- explain:
--   Basis = the event named by the decision's causation_id plus the events
--   named in its evidence_chain (see decision.unverified_basis for the
--   decision set). Fires when a memory.fact.invalidated with belief_status
--   `retracted` came strictly before the decision (earlier created_at; the
--   same instant does not count) and either
--   (a) carries the same payload.fact_id as a basis event that is a
--       memory.fact.added / memory.fact.updated, or
--   (b) has the basis event's id as its causation_id.
--   The retraction must come after the basis event it retracts (a fact
--   re-added after an old retraction is a new assertion). Conclusions that
--   depend on a retracted fact MUST be re-evaluated; a decision taken after
--   the retraction on that basis was not. One finding per (decision, basis
--   event); all retractions of that basis are listed, the first is named.
--   Example: memory.fact.added evt_1 (fact_id f1), memory.fact.invalidated
--   evt_2 (fact_id f1, belief_status retracted), then command.requested
--   evt_3 with causation_id evt_1 fires; evt_3 before evt_2 is silent.
WITH basis AS (
    SELECT * FROM decision_basis WHERE b_seq IS NOT NULL
),
retractions AS (
    SELECT r.seq, r.id, r.fact_id, r.causation_id, r.created_ns, r.created_at
    FROM ev r
    WHERE r.type = 'memory.fact.invalidated' AND r.belief_status = 'retracted'
),
-- (a) the retraction names the basis fact by fact_id
by_fact AS (
    SELECT b.d_seq, b.b_seq, r.seq AS r_seq, r.id AS r_id, r.created_ns AS r_ns,
           r.created_at AS r_at, concat('fact_id ', log_value(r.fact_id)) AS link
    FROM basis b
    JOIN retractions r ON r.fact_id = b.b_fact_id
    WHERE b.b_type IN ('memory.fact.added', 'memory.fact.updated')
),
-- (b) the retraction is caused by the basis event itself
by_causation AS (
    SELECT b.d_seq, b.b_seq, r.seq AS r_seq, r.id AS r_id, r.created_ns AS r_ns,
           r.created_at AS r_at, concat('causation_id ', log_value(r.causation_id)) AS link
    FROM basis b
    JOIN retractions r ON r.causation_id = b.ref_id
),
links AS (
    -- one row per (decision, basis, retraction), however it is linked
    SELECT d_seq, b_seq, r_seq, r_id, r_ns, r_at, min(link) AS link
    FROM (SELECT * FROM by_fact UNION ALL SELECT * FROM by_causation) u
    GROUP BY d_seq, b_seq, r_seq, r_id, r_ns, r_at
),
hits AS (
    SELECT h.*, b.d_id, b.d_type, b.d_task_id, b.d_created_at, b.ref_id, b.b_type, b.via
    FROM links h
    JOIN basis b ON b.d_seq = h.d_seq AND b.b_seq = h.b_seq
    -- after the basis event, strictly before the decision
    WHERE (h.r_ns > b.b_created_ns OR (h.r_ns = b.b_created_ns AND h.r_seq > b.b_seq))
      AND h.r_ns < b.d_created_ns
),
per_basis AS (
    SELECT d_seq, b_seq, d_id, d_type, d_task_id, d_created_at, ref_id, b_type, via,
           first_value(r_id ORDER BY r_ns, r_seq) AS first_r_id,
           first_value(r_at ORDER BY r_ns, r_seq) AS first_r_at,
           first_value(link ORDER BY r_ns, r_seq) AS first_link,
           array_agg(r_seq ORDER BY r_ns, r_seq) AS r_seqs
    FROM hits
    GROUP BY d_seq, b_seq, d_id, d_type, d_task_id, d_created_at, ref_id, b_type, via
)
SELECT d_task_id AS task_id,
       concat(log_value(d_type), ' ', log_value(d_id),
              CASE WHEN d_task_id IS NULL THEN '' ELSE concat(' of task ', log_value(d_task_id)) END,
              ' at ', instant_text(d_created_at),
              ' rests on ', log_value(ref_id), ' (', log_value(b_type), ', via ', via, '), which ', log_value(first_r_id),
              ' (memory.fact.invalidated, belief_status retracted, ', first_link, ') retracted at ',
              instant_text(first_r_at),
              '; a decision after the retraction must be re-evaluated without it') AS message,
       array_concat(make_array(d_seq, b_seq), r_seqs) AS seqs
FROM per_basis
