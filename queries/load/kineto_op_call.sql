-- kineto_op_call: the profiler's operators that record their input shapes, as op_call rows
--
-- A `cpu_op` event with `Input Dims` (torch.profiler record_shapes=True) whose name has a FLOP
-- formula (nsysreport.flops.SHAPED_OPS, passed in). `Input type` and `Concrete Inputs` are
-- kept as recorded (JSON text); nsysreport.flops reads them. The thread is the event's tid in
-- its process, as for the launches (kineto_runtime), so a launch finds the operator around it
-- on its own thread (activity_range, role op). Events without a duration last 0 ns.
--
-- Params:
--   $ops  VARCHAR[]  -  the operator names nsysreport.flops has a formula for
--
-- Reads: kineto_event
-- Writes: op_call
INSERT INTO op_call
SELECT e.event_index, (1::BIGINT << 48) | ((e.pid & 16777215) << 24) | (e.tid & 16777215),
    e.start, TRY_CAST(e.start::HUGEINT + greatest(coalesce(e.dur, 0), 0) AS BIGINT), e.name,
    json(e.args->'Input Dims'), json(e.args->'Input type'), json(e.args->'Concrete Inputs'),
    'profiler'
FROM kineto_event AS e
WHERE e.cat = 'cpu_op' AND e.pid IS NOT NULL AND e.start IS NOT NULL
    AND list_contains($ops::VARCHAR[], e.name)
