-- materialize: true
-- The basis of every decision (docs/protocol.md §7): the event
-- named by its causation_id plus every event named in its evidence_chain.
-- One row per (decision, referenced id); a reference naming the decision
-- itself is not part of its basis. `via` says where the reference came from.
-- The b_* columns describe the basis event when it is in the input
-- (first version of that id); b_seq is null for an unresolved reference.
WITH refs AS (
    -- the causation link
    SELECT d.seq AS d_seq, d.causation_id AS ref_id, 'causation_id' AS via
    FROM decisions d
    WHERE d.causation_id IS NOT NULL AND d.causation_id <> d.id
    UNION ALL
    -- every evidence_chain entry
    SELECT d.seq AS d_seq, x.ref_id, 'evidence_chain' AS via
    FROM decisions d
    JOIN evidence x ON x.event_seq = d.seq
    WHERE x.ref_id <> d.id
),
per_ref AS (
    -- one row per referenced id, even if named by both causation and chain
    SELECT d_seq, ref_id,
           CASE WHEN max(via) <> min(via) THEN 'causation_id and evidence_chain'
                ELSE min(via) END AS via
    FROM refs
    GROUP BY d_seq, ref_id
)
SELECT d.seq AS d_seq, d.id AS d_id, d.type AS d_type, d.task_id AS d_task_id,
       d.created_ns AS d_created_ns, d.created_at AS d_created_at,
       r.ref_id, r.via,
       b.seq AS b_seq, b.type AS b_type, b.task_id AS b_task_id,
       b.created_ns AS b_created_ns, b.created_at AS b_created_at,
       b.source_trust AS b_source_trust, b.fact_id AS b_fact_id,
       b.valid_until AS b_valid_until, b.stale_after AS b_stale_after,
       b.stale_at AS b_stale_at, b.stale_at_ns AS b_stale_at_ns
FROM per_ref r
JOIN decisions d ON d.seq = r.d_seq
LEFT JOIN ev b ON b.id = r.ref_id
