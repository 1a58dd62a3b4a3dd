-- gpu_segment: each GPU's timeline cut into segments by every activity start and end
--
-- The segments of the sweep (gpu_sweep, materialised) with their counters unpacked: for every
-- stretch between consecutive activity events, how many activities of each class are running.
-- Every union and difference in docs/metrics.md is then a sum of segment lengths under a
-- predicate, e.g.
--   busy = NOT idle;  exposed comm = exposed_comm(packed);  gap = idle
-- (the breakdown's parts beyond one class are macros over `packed`: queries/load/gpu_counter.sql).
-- Activities with end <= start carry no time and are left out; the segments tile
-- [first start, last end], none of zero length.
-- `seq` numbers a GPU's segments in time order (with holes where zero-length segments were
-- dropped), so the segments inside any window [a, b) are the seq range between the segments
-- containing a and b: two ASOF lookups and an equality join instead of a range join.
--
-- Reads: gpu_sweep
--
-- Columns:
--   pid              BIGINT    process id
--   device_id        BIGINT    nsys GPU id
--   seq              BIGINT    position in the GPU's sweep (increases with start_ns)
--   start_ns         BIGINT    segment start
--   end_ns           BIGINT    segment end
--   duration_ns      BIGINT    end_ns - start_ns (always > 0)
--   idle             BOOLEAN   nothing running (n_all = 0): every counter zero, so
--                              one comparison, which the scan filters on
--                              (5M kernels: the gaps in 0.1 s, by n_all = 0 in 0.26 s)
--   n_all            BIGINT    activities running
--   n_compute        BIGINT    compute kernels running (gemm, attention, other)
--   n_gemm           BIGINT    GEMM kernels running
--   n_attention      BIGINT    attention kernels running
--   n_comm           BIGINT    communication kernels running
--   n_memcpy         BIGINT    memcpys and memsets running
--   n_graph          BIGINT    CUDA graph launches traced as a whole running
--   packed           BIGINT    all those counters in one value (gpu_sweep's layout): equal
--                              counters, equal values, so a query can group by it first
--                              and, after, read the few groups apart (gpu_counter macros)
--   before_key       BIGINT    activity whose event opens the segment: activity_id * 4 +
--                              source (0 kernel, 1 memcpy, 2 memset, 3 graph)
--   after_key        BIGINT    activity whose event closes the segment, encoded the same way
CREATE VIEW gpu_segment AS
SELECT pid, device_id, seq, start_ns, end_ns, end_ns - start_ns AS duration_ns,
    packed = 0 AS idle,
    n_all(packed) AS n_all,
    n_compute(packed) AS n_compute,
    n_gemm(packed) AS n_gemm,
    n_attention(packed) AS n_attention,
    n_comm(packed) AS n_comm,
    n_memcpy(packed) AS n_memcpy,
    n_graph(packed) AS n_graph,
    packed,
    before_key,
    after_key
FROM gpu_sweep
