-- op_parent: the op calls with another op call nested inside them on their thread
--
-- Materialised (CREATE TABLE) when the trace is opened: op_kernel leaves these calls out, and
-- both compute queries read it (one sort of op_call, not two: 0.66 s at 800k op calls on the
-- 2-core VM). Op calls nest as push/pop ranges do: sorted by start, the one ending later first
-- (then row_id, as activity_range orders them), a call has a nested call exactly when the next
-- call on its thread starts before it ends, or at its start.
--
-- Reads: op_call
--
-- Columns:
--   row_id   BIGINT   the op_call's row_id
CREATE TABLE op_parent AS
WITH ordered AS (
    SELECT row_id, "start", "end",
        lead("start") OVER (PARTITION BY globalTid ORDER BY "start", "end" DESC, row_id)
            AS next_start
    FROM op_call
    WHERE globalTid IS NOT NULL AND "start" IS NOT NULL AND "end" IS NOT NULL
)
SELECT row_id FROM ordered WHERE next_start < "end" OR next_start = "start"
