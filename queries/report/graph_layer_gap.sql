-- graph_layer_gap: per GPU, kernels replayed from CUDA graphs and how many of them have no layer
--
-- A replayed kernel (graphNodeId set) belongs to the layer ranges open when its node was
-- created at capture time, when the export records node creation (graph_node_origin);
-- otherwise to the ranges around its cudaGraphLaunch, which usually holds no layer range, so
-- the kernel lands in `(outside layers)`. `no_layer_no_origin` counts those kernels: what the
-- report says is missing from the per-layer view for that reason. GPUs without graph kernels
-- have no row.
--
-- Reads: activity_range, graph_node_origin, kernel
--
-- Columns:
--   pid                  BIGINT    process id
--   device_id            BIGINT    nsys GPU id
--   graph_kernel_count   BIGINT    kernels replayed from a CUDA graph
--   with_origin          BIGINT    of those, with a recorded node creation
--   no_layer_no_origin   BIGINT    of those, with no node creation record and no layer
SELECT k.pid, k.device_id,
    count(*) AS graph_kernel_count,
    count(o.kernel_id) AS with_origin,
    count(*) FILTER (o.kernel_id IS NULL AND ar.range_id IS NULL) AS no_layer_no_origin
FROM kernel AS k
LEFT JOIN graph_node_origin AS o ON o.kernel_id = k.kernel_id
LEFT JOIN activity_range AS ar
    ON ar.source = 'kernel' AND ar.activity_id = k.kernel_id AND ar.role = 'layer'
WHERE k.graph_node_id IS NOT NULL OR k.graph_id IS NOT NULL
GROUP BY k.pid, k.device_id
ORDER BY k.pid, k.device_id
