-- id: provenance.chain_unordered
-- severity: low
-- family: provenance
-- dialect: any
-- summary: evidence_chain entries found in the input are not in time order
-- spec: docs/protocol.md §7 (decisions and provenance)
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
    -- chain entries that resolve to an event (chains of later versions are
    -- judged too, each on its own, and dropped by the final join with ev)
    SELECT x.event_seq, x.pos, x.ref_id, r.seq AS r_seq, r.created_ns AS r_ns,
           r.created_at AS r_at
    FROM evidence x
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
           lag(f.r_ns) OVER w AS lag_ns,
           lag(f.r_at) OVER w AS lag_at,
           lag(f.pos) OVER w AS lag_pos
    FROM found_entries f
    WINDOW w AS (ORDER BY f.event_seq, f.pos)
),
with_prev AS (
    SELECT event_seq, pos, ref_id, r_seq, r_ns, r_at,
           CASE WHEN lag_event_seq = event_seq THEN lag_ref END AS prev_ref,
           CASE WHEN lag_event_seq = event_seq THEN lag_seq END AS prev_seq,
           CASE WHEN lag_event_seq = event_seq THEN lag_ns END AS prev_ns,
           CASE WHEN lag_event_seq = event_seq THEN lag_at END AS prev_at,
           CASE WHEN lag_event_seq = event_seq THEN lag_pos END AS prev_pos
    FROM ordered
),
first_inversion AS (
    -- the first inversion of each chain (by position), picked from the few
    -- inversion rows in one aggregate: with_prev is read once, so the
    -- window above runs once
    SELECT event_seq, min(pos) AS pos,
           first_value(ref_id ORDER BY pos) AS ref_id,
           first_value(r_seq ORDER BY pos) AS r_seq,
           first_value(r_at ORDER BY pos) AS r_at,
           first_value(prev_ref ORDER BY pos) AS prev_ref,
           first_value(prev_seq ORDER BY pos) AS prev_seq,
           first_value(prev_at ORDER BY pos) AS prev_at,
           first_value(prev_pos ORDER BY pos) AS prev_pos
    FROM with_prev
    WHERE prev_ns > r_ns
    GROUP BY event_seq
)
SELECT e.task_id,
       concat(log_value(e.type), ' ', log_value(e.id), ' at ', instant_text(e.created_at),
              ' has an evidence_chain out of time order: entry ', CAST(i.pos + 1 AS VARCHAR), ' ', log_value(i.ref_id),
              ' (created ', instant_text(i.r_at), ') follows entry ',
              CAST(i.prev_pos + 1 AS VARCHAR), ' ', log_value(i.prev_ref),
              ' (created ', instant_text(i.prev_at),
              '); expected origin first, oldest to newest') AS message,
       make_array(e.seq, i.prev_seq, i.r_seq) AS seqs
FROM first_inversion i
JOIN ev e ON e.seq = i.event_seq
