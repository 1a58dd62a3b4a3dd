-- kineto_cleanup: drop the Kineto loader's temporary tables, view and macro
--
-- Run whether the load succeeded or not, so that a failed load leaves nothing behind on the
-- connection (the raw tables keep what was inserted: the caller reports the failure).
--
-- Writes: kineto_doc, kineto_event, kineto_host, kineto_string, kineto_gpu_event, kineto_ns
DROP VIEW IF EXISTS temp.kineto_gpu_event;
DROP TABLE IF EXISTS temp.kineto_doc;
DROP TABLE IF EXISTS temp.kineto_event;
DROP TABLE IF EXISTS temp.kineto_host;
DROP TABLE IF EXISTS temp.kineto_string;
DROP MACRO IF EXISTS temp.kineto_ns;
