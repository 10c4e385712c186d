-- id: provenance.chain_unordered
-- severity: low
-- family: provenance
-- dialect: any
-- summary: evidence_chain entries found in the input are not in time order
-- spec: RULES.md "Provenance, lifecycle and validity"; SPEC-NOTES.md §7
-- explain:
--   The evidence_chain is time-ordered, origin first. Looking only at the
--   entries that name events in the input (missing ones are skipped, not
--   guessed), fires when an entry's event was created strictly earlier than
--   the event of a preceding found entry (equal instants are in order). One
--   finding per chain, naming its first inversion (entries numbered from 1). An entry naming the
--   event itself takes part like any other.
--   Example: evt_9 with evidence_chain [evt_2 (12:00:05), evt_1 (12:00:01)]
--   fires; [evt_1, evt_missing, evt_2] is silent.
WITH found_entries AS (
    -- chain entries of first-version events that resolve to an event
    SELECT x.event_seq, x.pos, x.ref_id, r.seq AS r_seq, r.created_us AS r_us,
           r.created_at AS r_at
    FROM evidence x
    JOIN ev e ON e.seq = x.event_seq
    JOIN ev r ON r.id = x.ref_id
),
-- each found entry with the found entry before it (a chain is in order
-- exactly when every such pair is)
with_prev AS (
    SELECT f.*,
           lag(f.ref_id) OVER w AS prev_ref,
           lag(f.r_seq) OVER w AS prev_seq,
           lag(f.r_us) OVER w AS prev_us,
           lag(f.r_at) OVER w AS prev_at,
           lag(f.pos) OVER w AS prev_pos
    FROM found_entries f
    WINDOW w AS (PARTITION BY f.event_seq ORDER BY f.pos)
),
inversions AS (
    SELECT i.*, row_number() OVER (PARTITION BY i.event_seq ORDER BY i.pos) AS nth
    FROM with_prev i
    WHERE i.prev_us > i.r_us
)
SELECT e.task_id,
       concat(e.type, ' ', e.id, ' at ', to_char(arrow_cast(e.created_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
              ' has an evidence_chain out of time order: entry ', CAST(i.pos + 1 AS VARCHAR), ' ', i.ref_id,
              ' (created ', to_char(arrow_cast(i.r_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'), ') follows entry ',
              CAST(i.prev_pos + 1 AS VARCHAR), ' ', i.prev_ref,
              ' (created ', to_char(arrow_cast(i.prev_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
              '); expected origin first, oldest to newest') AS message,
       make_array(e.seq, i.prev_seq, i.r_seq) AS seqs
FROM inversions i
JOIN ev e ON e.seq = i.event_seq
WHERE i.nth = 1
