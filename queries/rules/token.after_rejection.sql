-- id: token.after_rejection
-- severity: high
-- family: token
-- dialect: any
-- summary: a handoff token is used for a delegation (task_id, delegated_to) after delegation.rejected for that pair
-- spec: docs/protocol.md §5 (delegation and handoff tokens)
-- explain:
--   delegation.rejected ends the flow for that target. Fires for every event
--   carrying a handoff token -- the issuing handoff.completed as well as
--   later presentations -- that comes after a delegation.rejected for the
--   same (task_id, delegated_to) pair. The pair is the event's own task_id
--   and delegated_to, each falling back to the token's binding (its issuing
--   event) when the event lacks it. Keyed on the pair: a rejection by one
--   delegate does not touch a token for another (escalations name a new
--   delegate). The finding names the earliest such rejection.
--   Example: delegation.rejected for (task_9, agent:worker) at 10:00, then a
--   task.started presenting the token issued for (task_9, agent:worker) at
--   10:02: fires. A token for (task_9, agent:supervisor): silent.
WITH uses AS (
    SELECT u.seq, u.id, u.type, u.created_ns, u.created_at, r.token_label,
           coalesce(u.task_id, r.ref_task_id) AS pair_task_id,
           coalesce(u.delegated_to, r.ref_delegated_to) AS pair_to
    FROM token_uses u
    JOIN token_refs r ON r.token = u.token
),
rejected_before AS (
    -- the use's own columns ride along in the grouping (one row per use; only
    -- the few after a rejection get here), so the final select needs no
    -- second join with uses, which would join token_uses and token_refs again
    SELECT u.seq, u.id, u.type, u.created_at, u.token_label, u.pair_task_id, u.pair_to,
           first_value(j.seq ORDER BY j.created_ns, j.seq) AS j_seq,
           first_value(j.id ORDER BY j.created_ns, j.seq) AS j_id,
           first_value(j.created_at ORDER BY j.created_ns, j.seq) AS j_at
    FROM uses u
    JOIN ev j ON j.task_id = u.pair_task_id AND j.delegated_to = u.pair_to
    WHERE j.type = 'delegation.rejected'
      AND (j.created_ns < u.created_ns OR (j.created_ns = u.created_ns AND j.seq < u.seq))
    GROUP BY u.seq, u.id, u.type, u.created_at, u.token_label, u.pair_task_id, u.pair_to
)
SELECT
    u.pair_task_id AS task_id,
    concat('handoff token ', u.token_label, ' used on ', log_value(u.type), ' ', log_value(u.id), ' at ',
           instant_text(u.created_at), ' for the delegation of task ', log_value(u.pair_task_id),
           ' to ', log_value(u.pair_to), ', which ', log_value(u.pair_to), ' had rejected (', log_value(u.j_id), ' at ', instant_text(u.j_at),
           '); expected no token for a rejected delegation') AS message,
    make_array(u.seq, u.j_seq) AS seqs
FROM rejected_before u
