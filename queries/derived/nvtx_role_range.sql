-- nvtx_role_range: NVTX ranges that play a role: step, layer, or naming a collective
--
-- Materialised (CREATE TABLE) when the trace is opened, because the step and layer patterns
-- are parameters and DuckDB compiles a constant pattern once but a pattern from a column once
-- per row. Collective ranges are PyTorch's `nccl:<op>` record_function ranges and NCCL's own
-- API ranges (group start/end excluded). `label` is the part of the name the role's pattern
-- matches, so `model.layers.3, op_id = 17` and `model.layers.3, op_id = 99` are one layer.
-- `label_index` is the first number in the label. A range may play several roles.
--
-- Reads: nvtx_range
--
-- Params:
--   $step_pattern    VARCHAR   -   regular expression for step ranges (--step-pattern)
--   $layer_pattern   VARCHAR   -   regular expression for layer ranges (--layer-pattern)
--   $torch_collective_pattern   VARCHAR   -   PyTorch's nccl:<op> ranges (patterns.py)
--   $nccl_collective_pattern    VARCHAR   -   NCCL's API ranges (patterns.py)
--
-- Columns:
--   range_id      BIGINT    row id in NVTX_EVENTS
--   role          VARCHAR   step, layer, torch_collective or nccl_collective
--   pid           BIGINT    process id
--   global_tid    BIGINT    nsys global thread id
--   start_ns      BIGINT    range start
--   end_ns        BIGINT    range end
--   name          VARCHAR   full range text
--   label         VARCHAR   the part of the name the role's pattern matches
--   label_index   BIGINT    first integer in the label, NULL if none
--   payload       BIGINT    integer payload (NCCL: message size in bytes), if any
CREATE TABLE nvtx_role_range AS
WITH matched AS (
    SELECT *, 'step' AS role, regexp_extract(name, $step_pattern) AS label
    FROM nvtx_range
    WHERE regexp_matches(name, $step_pattern)
    UNION ALL
    SELECT *, 'layer', regexp_extract(name, $layer_pattern)
    FROM nvtx_range
    WHERE regexp_matches(name, $layer_pattern)
    UNION ALL
    SELECT *, 'torch_collective', regexp_extract(name, $torch_collective_pattern)
    FROM nvtx_range
    WHERE regexp_matches(name, $torch_collective_pattern)
    UNION ALL
    SELECT *, 'nccl_collective', regexp_extract(name, $nccl_collective_pattern)
    FROM nvtx_range
    WHERE regexp_matches(name, $nccl_collective_pattern)
)
SELECT
    range_id,
    role,
    pid,
    global_tid,
    start_ns,
    end_ns,
    name,
    label,
    TRY_CAST(nullif(regexp_extract(label, '\d+'), '') AS BIGINT) AS label_index,
    payload
FROM matched
