-- old_gpu_list: the GPU list of an nsys 2020-2021 export in today's columns (id, name)
--
-- nsys 2021.2 and later write TARGET_INFO_GPU(id, name, ...), `id` being the activities'
-- deviceId. nsys 2020.5 wrote TARGET_INFO_GPU(vmId, deviceId, name, busLocation, isDiscrete):
-- its `deviceId` is taken as `id` (both 0 in every one-GPU export seen; docs/export-format.md,
-- "nsys 2020-2021", says what no export here could verify). nsys 2020.3 had no TARGET_INFO_GPU,
-- only TARGET_INFO_CUDA_GPU, one row per process and CUDA device (the activities' deviceId)
-- with the GPU's name: its devices become the list when the export has no other. Its memory
-- bandwidth is not taken: its unit changed between releases (0 or MiB-like values in 2020.3,
-- kB/s-like in 2020.5), so no HBM peak comes from an old export.
--
-- Reads: TARGET_INFO_CUDA_GPU, TARGET_INFO_GPU
--
-- Writes: TARGET_INFO_GPU
UPDATE TARGET_INFO_GPU SET id = deviceId WHERE id IS NULL;
INSERT INTO TARGET_INFO_GPU (file_row, id, name)
SELECT min(file_row), deviceId, min(name)
FROM TARGET_INFO_CUDA_GPU
WHERE deviceId IS NOT NULL AND NOT EXISTS (SELECT 1 FROM TARGET_INFO_GPU)
GROUP BY deviceId
