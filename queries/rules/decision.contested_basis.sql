-- id: decision.contested_basis
-- severity: medium
-- family: decision
-- dialect: any
-- summary: a decision rests on a basis event that an unresolved belief conflict contests
-- spec: docs/protocol.md §7 (decisions and provenance)
-- explain:
--   Basis = the event named by the decision's causation_id plus the events
--   named in its evidence_chain (see decision.unverified_basis for the
--   decision set). A belief.conflict.detected contests a basis event when
--   its causation_id or one of its evidence_chain entries names it. Fires
--   when such a conflict comes before the decision (log order: created_at,
--   then input order) and no belief.revised whose causation_id is that
--   conflict comes between the conflict and the decision (a revision after
--   the decision resolves it too late). Consumers SHOULD not act on
--   contested claims until a belief.revised resolves them. One finding per
--   (decision, contested basis event); every open conflict is listed, the
--   first is named.
--   Example: memory.fact.added evt_1, belief.conflict.detected evt_2 with
--   causation_id evt_1, then agent.decision.recorded evt_3 with causation_id
--   evt_1 fires; with belief.revised evt_4 (causation_id evt_2) before evt_3
--   it is silent.
WITH conflicts AS (
    SELECT c.seq, c.id, c.causation_id, c.created_ns, c.created_at
    FROM ev c
    WHERE c.type = 'belief.conflict.detected'
),
-- the events each conflict references
contested AS (
    SELECT seq AS c_seq, causation_id AS ref_id FROM conflicts WHERE causation_id IS NOT NULL
    UNION
    SELECT c.seq AS c_seq, x.ref_id FROM conflicts c JOIN evidence x ON x.event_seq = c.seq
),
-- the first belief.revised caused by each conflict, after it
first_revision AS (
    SELECT c.seq AS c_seq,
           first_value(v.seq ORDER BY v.created_ns, v.seq) AS v_seq,
           first_value(v.created_ns ORDER BY v.created_ns, v.seq) AS v_ns
    FROM conflicts c
    JOIN ev v ON v.causation_id = c.id AND v.type = 'belief.revised'
    WHERE v.created_ns > c.created_ns OR (v.created_ns = c.created_ns AND v.seq > c.seq)
    GROUP BY c.seq
),
-- conflicts on a basis event, before the decision, not resolved before it
open_conflicts AS (
    SELECT b.*, c.seq AS c_seq, c.id AS c_id, c.created_ns AS c_ns, c.created_at AS c_at,
           fr.v_seq
    FROM decision_basis b
    JOIN contested k ON k.ref_id = b.ref_id
    JOIN conflicts c ON c.seq = k.c_seq
    LEFT JOIN first_revision fr ON fr.c_seq = c.seq
    WHERE b.b_seq IS NOT NULL
      AND (c.created_ns < b.d_created_ns OR (c.created_ns = b.d_created_ns AND c.seq < b.d_seq))
      AND (fr.v_seq IS NULL
           OR fr.v_ns > b.d_created_ns OR (fr.v_ns = b.d_created_ns AND fr.v_seq > b.d_seq))
),
per_basis AS (
    SELECT d_seq, b_seq, d_id, d_type, d_task_id, d_created_at, ref_id, b_type, via,
           first_value(c_id ORDER BY c_ns, c_seq) AS first_c_id,
           first_value(c_at ORDER BY c_ns, c_seq) AS first_c_at,
           count(*) AS n_conflicts,
           array_agg(c_seq ORDER BY c_ns, c_seq) AS c_seqs
    FROM open_conflicts
    GROUP BY d_seq, b_seq, d_id, d_type, d_task_id, d_created_at, ref_id, b_type, via
)
SELECT d_task_id AS task_id,
       concat(log_value(d_type), ' ', log_value(d_id),
              CASE WHEN d_task_id IS NULL THEN '' ELSE concat(' of task ', log_value(d_task_id)) END,
              ' at ', instant_text(d_created_at),
              ' rests on ', log_value(ref_id), ' (', log_value(b_type), ', via ', via, '), contested by ',
              log_value(first_c_id), ' (belief.conflict.detected at ',
              instant_text(first_c_at), ')',
              CASE WHEN n_conflicts > 1
                   THEN concat(' and ', CAST(n_conflicts - 1 AS VARCHAR), ' more conflict(s)')
                   ELSE '' END,
              '; expected a belief.revised with causation_id ', log_value(first_c_id),
              ' before acting on it') AS message,
       array_concat(make_array(d_seq, b_seq), c_seqs) AS seqs
FROM per_basis
