-- Decision (or irreversible action) events: first versions whose type is in
-- the configured set `decision_types` (--decision-types; default
-- agent.decision.recorded, tool.call.requested, command.requested,
-- delegation.handoff.completed, compensation.requested).
SELECT e.seq, e.id, e.type, e.task_id, e.dialect, e.causation_id,
       e.created_ns, e.created_at
FROM ev e
WHERE e.type IN (SELECT d.type FROM decision_types d)
