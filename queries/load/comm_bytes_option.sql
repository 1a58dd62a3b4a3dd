-- comm_bytes_option: the message sizes given with --comm-bytes OP=BYTES, as a table
--
-- collective takes a communication kernel's message size from its NCCL range's payload, else
-- from this table by op. The two lists are one option per position. Replaced each time the
-- views are created.
--
-- Writes: comm_bytes_option
--
-- Params:
--   $ops    VARCHAR[]  -  normalised collective op (AllReduce, AllGather, ...)
--   $sizes  BIGINT[]   -  its message size in bytes
CREATE OR REPLACE TABLE comm_bytes_option AS
SELECT unnest($ops::VARCHAR[]) AS op, unnest($sizes::BIGINT[]) AS bytes
