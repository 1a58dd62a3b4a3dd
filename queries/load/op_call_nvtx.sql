-- op_call_nvtx: the op calls PyTorch's emit_nvtx recorded with shapes, from the NVTX rows loaded
--
-- One op_call row per NVTX range nvtx_op_call accepts (source 'nvtx', row_id its file_row;
-- types and concrete NULL: emit_nvtx records neither). Run after the copy of NVTX_EVENTS and
-- before nvtx_roleless_delete: the fast loaders' scan left out the ranges that play no role
-- (no step, layer or collective pattern matches them) but for those that may be op calls
-- (nvtx_op_candidate), which this reads and the delete then drops. So op calls stay out of
-- NVTX_EVENTS and in nvtx_unloaded's count like every roleless range, and no NVTX number
-- changes; a range that also plays a role stays loaded and is an op call all the same.
--
-- Cost (benchmarks/bench_load.py, 2-core VM, medians, HEAD before against this): 1M kernels
-- under 5M emit_nvtx ranges, 4M of them GEMM op calls with shapes (--emit-nvtx 5): load
-- 13.2 -> 20.4 s, peak RSS 281 -> 875 MiB (4M op_call rows, and their texts until the
-- delete); the same ranges without shapes (bench_report's 1000000:5): 6.7 -> 7.6 s (one pair
-- 5.9 against 5.9 s). A second scan of the file's table for the op calls, tried first, cost
-- more (both measured while the machine was busier): with shapes 21 -> 45 s where this took
-- 19 -> 43 s, without shapes 19 -> 26 s where this took 16 -> 17 s.
--
-- Reads: NVTX_EVENTS
-- Writes: op_call
--
-- Params:
--   $ops  VARCHAR[]  -  the operators that have a FLOPs formula (nsysreport.flops.SHAPED_OPS)
INSERT INTO op_call
SELECT file_row, globalTid, "start", "end", nvtx_op_name(nvtx_text(text)),
    nvtx_op_dims(nvtx_text(text)), NULL, NULL, 'nvtx'
FROM NVTX_EVENTS
WHERE nvtx_op_call(eventType, "end", endGlobalTid, globalTid, textId, text, $ops)
