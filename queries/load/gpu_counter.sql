-- gpu_counter: the macros that read gpu_sweep's packed counters apart, one definition for all
--
-- gpu_sweep packs the activities running in a segment, by class, in 10-bit fields of one
-- BIGINT (`packed`, lowest first: compute, gemm, attention, comm, memcpy, graph, where gemm and
-- attention kernels are compute kernels too). gpu_segment reads every segment's counters with
-- these. A query that only sums lengths by counters groups the segments by `packed` first and
-- reads the few groups apart (5M kernels, step_breakdown: 2.06 s summing the 11 parts over 6M
-- clipped segments, 1.28 s over their states). packed is 0 exactly when nothing runs and no
-- profiler overhead window is open (n_overhead, bit 60): an idle segment.
-- Created with the views (nsysreport.queries.create_views), so a cache file keeps them
-- beside the views that use them.
--
-- The breakdown's parts that are not one class alone are defined here too, once (docs/metrics.md,
-- "Time on one GPU"): exposed comm (comm, no compute), exposed memcpy (a copy, neither compute
-- nor comm), graph opaque (a graph launch, no kernel or copy) and profiler overhead (nothing
-- running, a window of nsys's own overhead open).
--
-- Writes: n_all, n_compute, n_gemm, n_attention, n_comm, n_memcpy, n_graph, n_overhead,
--   exposed_comm, exposed_memcpy, graph_opaque, profiler_overhead
CREATE OR REPLACE MACRO n_compute(packed) AS packed & 1023;
CREATE OR REPLACE MACRO n_gemm(packed) AS (packed >> 10) & 1023;
CREATE OR REPLACE MACRO n_attention(packed) AS (packed >> 20) & 1023;
CREATE OR REPLACE MACRO n_comm(packed) AS (packed >> 30) & 1023;
CREATE OR REPLACE MACRO n_memcpy(packed) AS (packed >> 40) & 1023;
CREATE OR REPLACE MACRO n_graph(packed) AS (packed >> 50) & 1023;
CREATE OR REPLACE MACRO n_overhead(packed) AS (packed >> 60) & 1;
CREATE OR REPLACE MACRO n_all(packed) AS
    n_compute(packed) + n_comm(packed) + n_memcpy(packed) + n_graph(packed);
CREATE OR REPLACE MACRO exposed_comm(packed) AS n_comm(packed) > 0 AND n_compute(packed) = 0;
CREATE OR REPLACE MACRO exposed_memcpy(packed) AS
    n_memcpy(packed) > 0 AND n_compute(packed) = 0 AND n_comm(packed) = 0;
CREATE OR REPLACE MACRO profiler_overhead(packed) AS
    n_all(packed) = 0 AND n_overhead(packed) > 0;
CREATE OR REPLACE MACRO graph_opaque(packed) AS
    n_graph(packed) > 0 AND n_compute(packed) = 0 AND n_comm(packed) = 0 AND n_memcpy(packed) = 0;
