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
ordered AS (
    -- one window over all chains in (event, position) order: the previous row
    -- is the previous found entry of the same chain when event_seq matches
    -- (faster than PARTITION BY event_seq with many small chains)
    SELECT f.*,
           lag(f.event_seq) OVER w AS lag_event_seq,
           lag(f.ref_id) OVER w AS lag_ref,
           lag(f.r_seq) OVER w AS lag_seq,
           lag(f.r_us) OVER w AS lag_us,
           lag(f.r_at) OVER w AS lag_at,
           lag(f.pos) OVER w AS lag_pos
    FROM found_entries f
    WINDOW w AS (ORDER BY f.event_seq, f.pos)
),
with_prev AS (
    SELECT event_seq, pos, ref_id, r_seq, r_us, r_at,
           CASE WHEN lag_event_seq = event_seq THEN lag_ref END AS prev_ref,
           CASE WHEN lag_event_seq = event_seq THEN lag_seq END AS prev_seq,
           CASE WHEN lag_event_seq = event_seq THEN lag_us END AS prev_us,
           CASE WHEN lag_event_seq = event_seq THEN lag_at END AS prev_at,
           CASE WHEN lag_event_seq = event_seq THEN lag_pos END AS prev_pos
    FROM ordered
),
inversions AS (
    -- the first inversion of each chain (by position)
    SELECT i.event_seq, min(i.pos) AS pos
    FROM with_prev i
    WHERE i.prev_us > i.r_us
    GROUP BY i.event_seq
),
first_inversion AS (
    SELECT i.*
    FROM with_prev i
    JOIN inversions f ON f.event_seq = i.event_seq AND f.pos = i.pos
)
SELECT e.task_id,
       concat(e.type, ' ', e.id, ' at ', to_char(arrow_cast(e.created_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
              ' has an evidence_chain out of time order: entry ', CAST(i.pos + 1 AS VARCHAR), ' ', i.ref_id,
              ' (created ', to_char(arrow_cast(i.r_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'), ') follows entry ',
              CAST(i.prev_pos + 1 AS VARCHAR), ' ', i.prev_ref,
              ' (created ', to_char(arrow_cast(i.prev_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ'),
              '); expected origin first, oldest to newest') AS message,
       make_array(e.seq, i.prev_seq, i.r_seq) AS seqs
FROM first_inversion i
JOIN ev e ON e.seq = i.event_seq
