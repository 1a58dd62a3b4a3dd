-- kernel_name: each distinct kernel name in the trace, classified once by kernel_class_rule
--
-- Names are classified here, on the few hundred distinct names, never per kernel row: a trace
-- of millions of kernels has only hundreds of names. Materialised (CREATE TABLE) when the trace
-- is opened, so the kernel view joins a small table instead of re-reading every kernel. The first matching rule (lowest priority)
-- wins; a name no rule matches is `other`. A name id missing from StringIds keeps a placeholder.
--
-- Columns:
--   name_id     BIGINT    StringIds id of the demangled name
--   name        VARCHAR   demangled kernel name
--   class       VARCHAR   comm, attention, gemm or other
CREATE TABLE kernel_name AS
WITH ids AS (SELECT DISTINCT demangledName AS name_id FROM CUPTI_ACTIVITY_KIND_KERNEL)
SELECT
    ids.name_id,
    coalesce(s.value, '<kernel name ' || ids.name_id || '>') AS name,
    coalesce(arg_min(r.class, r.priority), 'other') AS class
FROM ids
LEFT JOIN StringIds AS s ON s.id = ids.name_id
LEFT JOIN kernel_class_rule AS r ON regexp_matches(s.value, r.pattern, 'i')
GROUP BY ids.name_id, s.value
