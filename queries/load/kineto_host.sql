-- kineto_host: the host process and its globalPid in the nsys encoding
--
-- The pid with the most CUDA API calls, else the pid of CPU annotations, else 0. GPU events
-- carry pid = device in Kineto: they get this process's globalPid, so that launches join them
-- by correlation id. globalPid = (1 << 48) | (pid << 24), as nsys encodes it.
--
-- Reads: kineto_event
-- Writes: kineto_host
CREATE TEMP TABLE kineto_host AS
WITH candidates AS (
    SELECT pid, CASE WHEN cat IN ('cuda_runtime', 'cuda_driver') THEN 0 ELSE 1 END AS pref,
        count(*) AS n
    FROM kineto_event
    WHERE pid IS NOT NULL AND cat IN ('cuda_runtime', 'cuda_driver', 'user_annotation')
    GROUP BY ALL
),
host AS (SELECT coalesce((SELECT pid FROM candidates ORDER BY pref, n DESC, pid LIMIT 1), 0) AS pid)
SELECT pid, (1::BIGINT << 48) | ((pid & 16777215) << 24) AS gpid FROM host
