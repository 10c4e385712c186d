-- Decision basis references (causation_id / evidence_chain entries) naming
-- an event that is not in the input: one row per (decision, referenced id).
-- The report counts these rows as "unresolved"; no rule guesses about them.
SELECT d_seq, d_id, ref_id, via
FROM decision_basis
WHERE b_seq IS NULL
