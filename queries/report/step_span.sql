-- step_span: each step across all GPUs, from the earliest start to the latest end of its window
--
-- The k-th step of every GPU (step_window's step_ordinal) is one step of the whole job, as the
-- straggler analysis matches collectives. Its span runs from the first GPU's window start to
-- the last GPU's window end; `name` and `step_index` come from the GPU that sorts first.
--
-- Reads: step_window
--
-- Columns:
--   step_ordinal       BIGINT    1 = the first step
--   name               VARCHAR   step label, e.g. ProfilerStep#12 or step 3
--   step_index         BIGINT    the number in the label
--   gpus               BIGINT    GPUs that ran this step
--   start_ns           BIGINT    earliest window start over the GPUs
--   end_ns             BIGINT    latest window end over the GPUs
--   duration_ns        BIGINT    end_ns - start_ns
--   max_step_time_ns   BIGINT    the longest of the GPUs' step times
SELECT step_ordinal,
    arg_min(name, (pid, device_id)) AS name,
    arg_min(step_index, (pid, device_id)) AS step_index,
    count(*) AS gpus,
    min(start_ns) AS start_ns,
    max(end_ns) AS end_ns,
    (max(end_ns) - min(start_ns))::BIGINT AS duration_ns,
    max(end_ns - start_ns)::BIGINT AS max_step_time_ns
FROM step_window
GROUP BY step_ordinal
ORDER BY step_ordinal
