-- side_tables: the tables a load fills beside the raw tables, empty
--
-- load_skipped: rows of a source table that no loader could type (a value in an integer column
-- that is not an integer: text, a BLOB, a fraction), left out and counted by source table and
-- reason; the skipped_row view reports them. load_kept: rows a loader kept with a value it
-- had to take from elsewhere (a profiler event whose stream is not a number: its tid), counted
-- by source table and reason; data_quality reports them. nvtx_unloaded: NVTX ranges left in the file
-- because they can play no role (nvtx_roleless), counted for the Capture section.
-- source_table: every table and view of the trace file, for what the report can say about
-- the capture (whether it has GPU metric tables, usable samples or not).
-- comm_group_launch: the communicator a communication kernel ran on, as the trace records it
-- at the kernel (a PyTorch profiler trace's kernel args: kineto_comm_group), keyed like the
-- kernel by process and correlation id; group_source names the field it came from;
-- comm_ranks the group's global ranks ("0,1,2,3") and comm_desc its description, if recorded.
-- job_world: the job's size as the trace records it (a PyTorch profiler trace's
-- distributedInfo.world_size) and how many process groups it lists (NULL: it does not say).
--
-- nccl_payload: what NCCL's NVTX payload of an API range says (nsysreport.nvtx_payload): its
-- communicator (commHash as 0x%016x, the same on every rank of the communicator), and where
-- recorded the communicator's rank count and this rank (init calls) and the message bytes
-- (collectives); range_id is the range's file_row in NVTX_EVENTS.
--
-- op_call: the framework operators whose input shapes the trace records, one row per call
-- (what FLOPs are counted from: nsysreport.flops): a PyTorch profiler trace's `cpu_op` events
-- with `Input Dims` (kineto_op_call), an nsys export's emit_nvtx ranges recorded with shapes
-- (`sizes = [[...]]`). Only the operators nsysreport.flops has a formula for. dims is the
-- shapes as JSON text ("[[2, 2048], [2048, 1]]"), types the input dtypes as JSON text
-- (["float", "float"]; NULL when not recorded: emit_nvtx records none), concrete the scalar
-- inputs as JSON text (Kineto's `Concrete Inputs`, else NULL); source is `profiler` or `nvtx`;
-- row_id the event's place in its source (event_index, NVTX_EVENTS' file_row). A kernel
-- belongs to the innermost op_call on the thread that launched it, around its launch.
--
-- gpu_device: each device id the GPU rows carry, how many rows carry it (row_count), and what
-- the GPU list (TARGET_INFO_GPU) makes of it (gpu_list_match): listed_id the list's entry for
-- it (NULL: none); verdict `listed`, `renumbered` (the list numbers it listed_id), `stray`
-- (left out: unusable_row), `unmatched` (a GPU the list does not describe) or `no list`.
--
-- python_call: the Python frames a PyTorch profiler trace recorded (with_stack=True: Kineto's
-- `python_function` events) that last at least 100 µs (kineto_python), as "file(line):
-- function" names; what an idle gap's host cause can name (gap_top). Empty for nsys exports.
--
-- Writes: load_skipped, load_kept, nvtx_unloaded, source_table, comm_group_launch, job_world,
--   nccl_payload, op_call, gpu_device, python_call
CREATE TABLE load_skipped (source VARCHAR, reason VARCHAR, count BIGINT);
CREATE TABLE load_kept (source VARCHAR, reason VARCHAR, count BIGINT);
CREATE TABLE nvtx_unloaded (count BIGINT);
CREATE TABLE source_table (name VARCHAR);
CREATE TABLE comm_group_launch (
    globalPid BIGINT, correlationId BIGINT, group_size BIGINT, group_source VARCHAR,
    comm_group VARCHAR, comm_ranks VARCHAR, comm_desc VARCHAR
);
CREATE TABLE job_world (world_size BIGINT, process_groups BIGINT, source VARCHAR);
CREATE TABLE nccl_payload (
    range_id BIGINT, comm_hash VARCHAR, nranks BIGINT, rank BIGINT, message_bytes BIGINT
);
CREATE TABLE op_call (
    row_id BIGINT, globalTid BIGINT, "start" BIGINT, "end" BIGINT, name VARCHAR, dims VARCHAR,
    types VARCHAR, concrete VARCHAR, source VARCHAR
);
CREATE TABLE gpu_device (device_id BIGINT, row_count BIGINT, listed_id BIGINT, verdict VARCHAR);
CREATE TABLE python_call (
    row_id BIGINT, globalTid BIGINT, "start" BIGINT, "end" BIGINT, name VARCHAR
);
