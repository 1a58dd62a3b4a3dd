-- kineto_gpu_name: the GPUs' names from the trace's deviceProperties, by device id
--
-- Reads: kineto_doc
-- Writes: TARGET_INFO_GPU
INSERT INTO TARGET_INFO_GPU (id, name)
SELECT TRY_CAST(d->>'id' AS BIGINT), d->>'name'
FROM (SELECT unnest(deviceProperties) AS d FROM kineto_doc)
WHERE TRY_CAST(d->>'id' AS BIGINT) IS NOT NULL
