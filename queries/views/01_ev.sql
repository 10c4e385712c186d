-- The events every rule sees: the first content under each id (version 1).
-- Exact redeliveries are already collapsed by the ingest; later versions
-- (same id, different content) only matter to integrity.conflicting_duplicate.
--   task_key, parent_key  what the views group, sort and join tasks by: equal
--                         for equal task ids across both columns. Here the
--                         ids themselves; an audit of a loaded log numbers
--                         them (src/rules/ev_table.rs), which is faster.
--                         Compare keys only with keys.
-- (That audit's ev also holds `type` dictionary-encoded: the same values.)
SELECT *, task_id AS task_key, parent_task_id AS parent_key FROM events WHERE version = 1
