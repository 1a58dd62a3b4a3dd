-- kineto_has_gpu: whether the trace holds any GPU event (kernel, gpu_memcpy, gpu_memset)
--
-- A trace profiled without ProfilerActivity.CUDA has none: there is nothing to report.
--
-- Reads: kineto_event
SELECT EXISTS (
    SELECT 1 FROM kineto_event WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')
) AS has_gpu
