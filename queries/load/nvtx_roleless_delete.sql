-- nvtx_roleless_delete: remove the loaded NVTX ranges that can play no role (nvtx_roleless)
--
-- The careful read loads every row it can type; the fast loader's scan loaded none of these,
-- so after it this deletes nothing.
--
-- Reads: NVTX_EVENTS
-- Writes: NVTX_EVENTS
--
-- Params:
--   $roles  VARCHAR  -  the step, layer and collective patterns in one (Patterns.role_pattern)
DELETE FROM NVTX_EVENTS
WHERE nvtx_roleless(eventType, "end", endGlobalTid, globalTid, textId, text, $roles)
