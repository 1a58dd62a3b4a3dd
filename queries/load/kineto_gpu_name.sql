-- kineto_gpu_name: the GPUs' names from the trace's deviceProperties, by device id
--
-- deviceProperties is a list of objects with `id` and `name`; anything else names no GPU.
--
-- Reads: kineto_doc
-- Writes: TARGET_INFO_GPU
INSERT INTO TARGET_INFO_GPU (id, name)
SELECT TRY_CAST(d->>'id' AS BIGINT), d->>'name'
FROM (
    SELECT unnest(from_json(deviceProperties, '["json"]')) AS d
    FROM kineto_doc
    WHERE json_type(deviceProperties) = 'ARRAY'
)
WHERE TRY_CAST(d->>'id' AS BIGINT) IS NOT NULL
