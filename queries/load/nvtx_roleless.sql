-- nvtx_roleless: nvtx_roleless(...), whether an NVTX row is a range that can play no role
--
-- A closed push/pop or start/end range (event types 59, 60, 70, 71) on one thread whose inline
-- text (never a registered string: textId) matches none of the step, layer and collective
-- patterns (`roles`, Patterns.role_pattern): PyTorch's emit_nvtx writes about five per kernel,
-- each text unique, and no analysis reads them. The fast loader never loads them (its scan
-- keeps the rows where this is not true) and nvtx_roleless_delete removes those another read
-- loaded, so every loader leaves the same rows. A macro: DuckDB expands it in place, so the
-- scan of the trace file sees the predicate as if written out. NUL bytes are removed from
-- the text first (as every loader removes them) where it has one: replace() on every text
-- cost 4.6 s at 4M texts, the test for a NUL 0.3 s.
--
-- Writes: nvtx_roleless
CREATE OR REPLACE TEMP MACRO nvtx_roleless(event_type, end_ns, end_tid, tid, text_id, txt, roles)
AS event_type IN (59, 60, 70, 71) AND end_ns IS NOT NULL
    AND (end_tid IS NULL OR end_tid = tid)
    AND text_id IS NULL AND txt IS NOT NULL
    AND NOT regexp_matches(
        CASE WHEN contains(txt, chr(0)) THEN replace(txt, chr(0), '') ELSE txt END, roles
    )
