-- kineto_hostname: the host name, from distributedInfo else the document's hostname
--
-- Reads: kineto_doc
-- Writes: TARGET_INFO_SYSTEM_ENV
INSERT INTO TARGET_INFO_SYSTEM_ENV (name, value)
SELECT 'Hostname', coalesce(distributedInfo->>'hostname', hostname->>'$')
FROM kineto_doc
WHERE coalesce(distributedInfo->>'hostname', hostname->>'$') IS NOT NULL
