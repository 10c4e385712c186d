-- id: lifecycle.conflicting_parent
-- severity: medium
-- family: lifecycle
-- dialect: any
-- summary: one task carries two (or more) different parent_task_id values
-- spec: docs/protocol.md §4 (task lifecycle), §9.5 (parent link)
-- explain:
--   A task's parent is the parent_task_id on any event whose task_id is
--   that task: in the envelope, in payload.parent_task_id, or on a
--   delegation.* event. Fires once per task when those values (envelope and
--   payload are both taken, so one event whose envelope and payload
--   disagree counts too) name more than one parent. The finding lists each
--   parent with the first event naming it, in time order, and points first
--   at the event that introduced the second value. Children are checked
--   under each parent they name (orphan.*, parent.*).
--   Example: task.submitted of task_9 with parent_task_id task_7, then a
--   delegation.accepted for task_9 with parent_task_id task_8: fires on the
--   delegation event.
WITH named AS (
    -- first-version events naming a parent for their task, in any place
    -- (parent_task_id is set whenever one of the other two is)
    SELECT task_id, task_key, env_parent_task_id, p_parent_task_id, parent_task_id, parent_key,
           seq, id, created_ns, created_at
    FROM ev
    WHERE task_key IS NOT NULL AND parent_key IS NOT NULL
),
conflicted AS (
    -- tasks whose parent values are not all equal, in one cheap aggregate;
    -- only these go on to the (costly) ordered lists. parent_task_id is the
    -- envelope's value, else the payload's, so an event adds a second value
    -- of its own only when both are set and differ; otherwise the values
    -- differ across events, as their keys (01_ev.sql) do
    SELECT task_key
    FROM named
    GROUP BY task_key
    HAVING min(parent_key) <> max(parent_key)
        OR coalesce(bool_or(env_parent_task_id <> p_parent_task_id), false)
),
parent_values AS (
    -- the envelope, payload and resolved (ingest) link values of those tasks
    SELECT task_id, parent, ord, seq, id, created_ns, created_at
    FROM (
        SELECT n.task_id, n.seq, n.id, n.created_ns, n.created_at,
               unnest(make_array(n.env_parent_task_id, n.p_parent_task_id, n.parent_task_id)) AS parent,
               time_order(n.created_ns, n.seq) AS ord
        FROM named n
        JOIN conflicted c ON c.task_key = n.task_key
    ) v
    WHERE parent IS NOT NULL
),
first_naming AS (
    -- the first event naming each parent, taken from the rows at hand (only
    -- the few conflicted tasks': first_value is cheap on so few groups, and
    -- no join with every event is needed)
    SELECT task_id, parent,
           first_value(seq ORDER BY ord) AS seq,
           first_value(id ORDER BY ord) AS id,
           first_value(created_ns ORDER BY ord) AS created_ns,
           first_value(created_at ORDER BY ord) AS created_at
    FROM parent_values
    GROUP BY task_id, parent
),
per_task AS (
    SELECT task_id, count(*) AS n_parents,
           string_agg(concat(log_value(parent), ' (', log_value(id), ' at ',
                             instant_text(created_at), ')'),
                      ', ' ORDER BY created_ns, seq, parent) AS parents,
           array_agg(seq ORDER BY created_ns, seq, parent) AS naming_seqs
    FROM first_naming
    GROUP BY task_id
    HAVING count(*) > 1
)
SELECT
    task_id,
    concat('task ', log_value(task_id), ' names ', n_parents, ' different parents: ', parents,
           '; expected one parent_task_id per task') AS message,
    -- the event that introduced the second parent first, then the first one
    array_concat(make_array(naming_seqs[2], naming_seqs[1]),
                 array_slice(naming_seqs, 3, n_parents)) AS seqs
FROM per_task
