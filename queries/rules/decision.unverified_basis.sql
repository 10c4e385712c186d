-- id: decision.unverified_basis
-- severity: high
-- family: decision
-- dialect: any
-- summary: a decision whose basis events that carry a source_trust are all unverified
-- spec: docs/protocol.md §7 (decisions and provenance)
-- explain:
--   A decision is an event whose type is in the configured decision set
--   (--decision-types; default agent.decision.recorded, tool.call.requested,
--   command.requested, delegation.handoff.completed, compensation.requested).
--   Its basis is the event named by its causation_id plus every event named
--   in its evidence_chain, as far as they are in the input (references to
--   missing events are only counted as unresolved in the report; an entry
--   naming the decision itself is ignored).
--   Fires when at least one basis event carries a source_trust and every
--   basis event that carries one says `unverified`: unverified input MUST NOT
--   be the sole basis of an irreversible decision. Basis events without a
--   source_trust are not assertions and count neither way, so one verified,
--   attested or signed basis event keeps the decision silent. The time of a
--   basis event does not matter here.
--   Example: tool.call.requested evt_9 with causation_id evt_3 (source_trust
--   unverified) and evidence_chain [evt_2 (no source_trust)] fires; add
--   evt_4 (source_trust verified) to its chain and it is silent.
WITH trusted_basis AS (
    -- basis events found in the input that make a trust assertion
    SELECT * FROM decision_basis
    WHERE b_seq IS NOT NULL AND b_source_trust IS NOT NULL
),
all_unverified AS (
    -- decisions whose trust-asserting basis is all unverified (cheap counts
    -- first: only these go on to the ordered lists)
    SELECT d_seq
    FROM trusted_basis
    GROUP BY d_seq
    HAVING sum(CASE WHEN b_source_trust = 'unverified' THEN 1 ELSE 0 END) = count(*)
),
per_decision AS (
    SELECT b.d_seq, b.d_id, b.d_type, b.d_task_id, b.d_created_at,
           array_agg(b.b_seq ORDER BY b.b_created_ns, b.b_seq) AS basis_seqs,
           string_agg(concat(log_value(b.ref_id), ' (', log_value(b.b_type), ', via ', b.via, ')'), ', '
                      ORDER BY b.b_created_ns, b.b_seq) AS basis_list
    FROM trusted_basis b
    JOIN all_unverified u ON u.d_seq = b.d_seq
    GROUP BY b.d_seq, b.d_id, b.d_type, b.d_task_id, b.d_created_at
)
SELECT d_task_id AS task_id,
       concat(log_value(d_type), ' ', log_value(d_id),
              CASE WHEN d_task_id IS NULL THEN '' ELSE concat(' of task ', log_value(d_task_id)) END,
              ' at ', instant_text(d_created_at),
              ' rests only on unverified input: every basis event with a source_trust is unverified (',
              basis_list, '); expected at least one verified, attested or signed basis event',
              ' before this decision') AS message,
       array_concat(make_array(d_seq), basis_seqs) AS seqs
FROM per_decision
