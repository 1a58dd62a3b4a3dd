-- no_usable_kernel: why no kernel can be used, for a trace with kernels of which none is usable
--
-- A trace whose kernel rows were all left out (untyped at load, or unusable: skipped_row) has
-- nothing the analysis can stand on, and is refused (nsysreport.database) rather than reported
-- as a trace of copies alone. One row per reason, the most common first: the kernels' reasons
-- (CUPTI_ACTIVITY_KIND_KERNEL) and, in a PyTorch profiler trace, those of the GPU events that
-- were not read at all (traceEvents; kernels among them cannot be told from copies). No row
-- when a kernel, or a CUDA graph launch traced whole, is usable, or when the trace never had
-- a kernel row (copies or memsets alone report as they always have).
--
-- Reads: graph_launch, kernel, skipped_row
SELECT source, reason, count
FROM skipped_row
WHERE source IN ('CUPTI_ACTIVITY_KIND_KERNEL', 'traceEvents')
    AND EXISTS (SELECT 1 FROM skipped_row WHERE source = 'CUPTI_ACTIVITY_KIND_KERNEL')
    AND NOT EXISTS (SELECT 1 FROM kernel)
    AND NOT EXISTS (SELECT 1 FROM graph_launch)
ORDER BY source, count DESC, reason
