-- id: decision.unverified_basis
-- severity: high
-- family: decision
-- dialect: any
-- summary: a decision whose basis events that carry a source_trust are all unverified
-- spec: RULES.md "Unverified decisions"; SPEC-NOTES.md §7
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
per_decision AS (
    SELECT d_seq, d_id, d_type, d_task_id, d_created_at,
           count(*) AS n_trusted,
           sum(CASE WHEN b_source_trust = 'unverified' THEN 1 ELSE 0 END) AS n_unverified,
           array_agg(b_seq ORDER BY b_created_us, b_seq) AS basis_seqs,
           string_agg(concat(ref_id, ' (', b_type, ', via ', via, ')'), ', '
                      ORDER BY b_created_us, b_seq) AS basis_list
    FROM trusted_basis
    GROUP BY d_seq, d_id, d_type, d_task_id, d_created_at
)
SELECT d_task_id AS task_id,
       concat(d_type, ' ', d_id,
              CASE WHEN d_task_id IS NULL THEN '' ELSE concat(' of task ', d_task_id) END,
              ' at ', to_char(arrow_cast(d_created_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
              ' rests only on unverified input: every basis event with a source_trust is unverified (',
              basis_list, '); expected at least one verified, attested or signed basis event',
              ' before this decision') AS message,
       array_concat(make_array(d_seq), basis_seqs) AS seqs
FROM per_decision
WHERE n_unverified = n_trusted
