-- sync_call: the host's CUDA calls that wait for the GPU (synchronise, or a blocking copy)
--
-- An idle gap on a GPU whose next activity was launched by a thread that sat in one of these
-- during the gap was the host waiting for the GPU before it could launch more: gap_top and
-- perfetto_span name the gap's cause by the call that overlaps it most (of equal overlaps, the
-- later one).
--
-- Reads: launch
--
-- Columns:
--   launch_id    BIGINT    the call's launch_id
--   global_tid   BIGINT    nsys global thread id
--   start_ns     BIGINT    call start
--   end_ns       BIGINT    call end
--   name         VARCHAR   API name without version suffix
CREATE VIEW sync_call AS
SELECT launch_id, global_tid, start_ns, end_ns, name
FROM launch
WHERE name IN (
    'cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize',
    'cudaMemcpy', 'cudaMemcpy2D', 'cudaMemcpy3D', 'cudaMemcpyToSymbol',
    'cudaMemcpyFromSymbol', 'cuCtxSynchronize', 'cuStreamSynchronize',
    'cuEventSynchronize', 'cuMemcpyDtoH', 'cuMemcpyHtoD', 'cuMemcpy'
)
