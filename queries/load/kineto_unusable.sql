-- kineto_unusable: events that would be GPU work but cannot be read as such, counted as skipped
--
-- A complete event (ph X) with no category says not what it is; an event of a GPU category
-- that is not a complete event has no duration. Profilers write neither. Counted in
-- load_skipped, which the skipped_row view reports.
--
-- Reads: kineto_doc
-- Writes: load_skipped
INSERT INTO load_skipped
SELECT 'traceEvents', reason, count(*)
FROM (
    SELECT CASE
        WHEN e.ph = 'X' AND e.cat IS NULL THEN 'complete event (ph X) with no cat'
        WHEN e.cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND e.ph IS DISTINCT FROM 'X'
            THEN 'GPU event that is not a complete event (ph X)'
    END AS reason
    FROM (SELECT unnest(traceEvents) AS e FROM kineto_doc)
)
WHERE reason IS NOT NULL
GROUP BY reason
