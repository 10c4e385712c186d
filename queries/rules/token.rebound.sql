-- id: token.rebound
-- severity: critical
-- family: token
-- dialect: any
-- summary: one handoff token appears with two different binding tuples (delegated_by, delegated_to, task_id, parent_task_id)
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   A token binds one tuple (delegated_by, delegated_to, task_id,
--   parent_task_id). The token's binding is taken from its first issuing
--   delegation.handoff.completed (or its first appearance when the input
--   holds no issuing event), each field from the first event in that order
--   that has it. Fires once for every event carrying the token (issuing or
--   presenting) whose own value of any of the four fields differs from that
--   binding; the message names each differing field. A field absent on an
--   event does not count as different (presenting events rarely carry the
--   delegation fields). parent_task_id is the resolved link (envelope, else
--   payload).
--   Example: ht_1 issued by evt_4 for task_9 to agent:worker; a later
--   handoff.completed evt_12 with ht_1 for task_11 fires on evt_12.
--   task.started of task_9 presenting ht_1 with no delegated_to: silent.
WITH differing AS (
    SELECT u.seq, u.id, u.type, u.task_id, u.created_at, r.token_label,
           r.ref_seq, r.ref_id, r.ref_type,
           concat_ws('; ',
               CASE WHEN u.delegated_by <> r.ref_delegated_by
                    THEN concat('delegated_by ', log_value(u.delegated_by), ' instead of ', log_value(r.ref_delegated_by)) END,
               CASE WHEN u.delegated_to <> r.ref_delegated_to
                    THEN concat('delegated_to ', log_value(u.delegated_to), ' instead of ', log_value(r.ref_delegated_to)) END,
               CASE WHEN u.task_id <> r.ref_task_id
                    THEN concat('task_id ', log_value(u.task_id), ' instead of ', log_value(r.ref_task_id)) END,
               CASE WHEN u.parent_task_id <> r.ref_parent_task_id
                    THEN concat('parent_task_id ', log_value(u.parent_task_id), ' instead of ', log_value(r.ref_parent_task_id)) END
           ) AS diffs
    FROM token_uses u
    JOIN token_refs r ON r.token = u.token
    -- comparisons with an absent field are null, i.e. not a difference
    WHERE u.delegated_by <> r.ref_delegated_by
       OR u.delegated_to <> r.ref_delegated_to
       OR u.task_id <> r.ref_task_id
       OR u.parent_task_id <> r.ref_parent_task_id
)
SELECT
    d.task_id,
    concat('handoff token ', d.token_label, ' on ', log_value(d.type), ' ', log_value(d.id), ' at ',
           instant_text(d.created_at), ' is bound to another delegation than on ',
           log_value(d.ref_type), ' ', log_value(d.ref_id), ': ', d.diffs,
           '; expected one token per (delegated_by, delegated_to, task_id, parent_task_id)') AS message,
    make_array(d.seq, d.ref_seq) AS seqs
FROM differing d
