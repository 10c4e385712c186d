-- The events every rule sees: the first content under each id (version 1).
-- Exact redeliveries are already collapsed by the ingest; later versions
-- (same id, different content) only matter to integrity.conflicting_duplicate.
SELECT * FROM events WHERE version = 1
