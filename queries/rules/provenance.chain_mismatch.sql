-- id: provenance.chain_mismatch
-- severity: low
-- family: provenance
-- dialect: any
-- summary: an evidence_chain whose last entry is not the event's causation_id
-- spec: docs/protocol.md §7 (decisions and provenance)
-- explain:
--   The evidence_chain is time-ordered, origin first, and its last entry is
--   the causation_id. Fires for an event that has both a non-empty
--   evidence_chain and a causation_id when the chain's last entry is not the
--   causation_id. An entry equal to the event's own id at the end is skipped
--   first (the spec's own example ends the chain with the event itself); a
--   chain holding nothing but the event itself then has no last entry and
--   fires. The events named are linked in the finding when they are in the
--   input.
--   Example: evt_5 with causation_id evt_4 and evidence_chain [evt_1, evt_3]
--   fires; [evt_1, evt_4] and [evt_1, evt_4, evt_5] are silent.
WITH chained AS (
    SELECT e.seq, e.id, e.type, e.task_id, e.causation_id, e.created_at
    FROM ev e
    WHERE e.evidence_len > 0 AND e.causation_id IS NOT NULL
),
-- the last two entries of each chain: one window over all chains in (event,
-- position) order, read at each chain's last row (the row before it is the
-- previous entry when event_seq matches; faster than row_number() over
-- PARTITION BY event_seq with many small chains)
tail AS (
    SELECT event_seq, last_ref, prev_ref
    FROM (
        SELECT x.event_seq, x.ref_id AS last_ref,
               CASE WHEN lag(x.event_seq) OVER w = x.event_seq THEN lag(x.ref_id) OVER w END AS prev_ref,
               lead(x.event_seq) OVER w AS next_event_seq
        FROM evidence x
        JOIN chained c ON c.seq = x.event_seq
        WINDOW w AS (ORDER BY x.event_seq, x.pos)
    ) x
    WHERE next_event_seq IS NULL OR next_event_seq <> event_seq
),
effective AS (
    SELECT c.*,
           CASE WHEN t.last_ref = c.id THEN t.prev_ref ELSE t.last_ref END AS end_ref,
           t.last_ref = c.id AS self_skipped
    FROM chained c
    JOIN tail t ON t.event_seq = c.seq
)
SELECT f.task_id,
       concat(log_value(f.type), ' ', log_value(f.id), ' at ', instant_text(f.created_at),
              ' has causation_id ', log_value(f.causation_id), ' but its evidence_chain ',
              CASE WHEN f.end_ref IS NULL
                   THEN 'names only the event itself'
                   ELSE concat('ends with ', log_value(f.end_ref),
                               CASE WHEN f.self_skipped THEN ' (before the entry naming the event itself)' ELSE '' END)
              END,
              '; expected the chain to end with the causation_id ', log_value(f.causation_id)) AS message,
       -- the event, then the causation and the chain's end when they are in the input
       array_concat(make_array(f.seq),
                    CASE WHEN ce.seq IS NULL THEN make_array() ELSE make_array(ce.seq) END,
                    CASE WHEN le.seq IS NULL THEN make_array() ELSE make_array(le.seq) END) AS seqs
FROM effective f
LEFT JOIN ev ce ON ce.id = f.causation_id
LEFT JOIN ev le ON le.id = f.end_ref
WHERE f.end_ref IS NULL OR f.end_ref <> f.causation_id
