-- kineto_defaulted: GPU events kept with a stream or device taken from the event itself
--
-- kineto_gpu_event reads a GPU event's device and stream from its args, else from Kineto's
-- pid and tid (older traces write no args.stream; their tid is the stream). Where args does
-- hold the key but its value is no number (null, text), the event is kept on its tid (pid)
-- and counted here: load_kept, which data_quality reports.
--
-- Reads: kineto_event
-- Writes: load_kept
INSERT INTO load_kept
SELECT CASE cat
        WHEN 'kernel' THEN 'CUPTI_ACTIVITY_KIND_KERNEL'
        WHEN 'gpu_memcpy' THEN 'CUPTI_ACTIVITY_KIND_MEMCPY'
        ELSE 'CUPTI_ACTIVITY_KIND_MEMSET'
    END AS source,
    reason,
    count(*)
FROM (
    SELECT cat, 'a stream that is not a number: the event''s tid as its stream' AS reason
    FROM kineto_event
    WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND json_exists(args, '$.stream')
        AND TRY_CAST(args->>'stream' AS BIGINT) IS NULL
    UNION ALL
    SELECT cat, 'a device that is not a number: the event''s pid as its device'
    FROM kineto_event
    WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset') AND json_exists(args, '$.device')
        AND TRY_CAST(args->>'device' AS BIGINT) IS NULL
)
GROUP BY ALL
ORDER BY source, reason
