-- kernel_name: each distinct kernel name in the trace, classified once by kernel_class_rule
--
-- Names are classified here, on the few hundred distinct names, never per kernel row: a trace
-- of millions of kernels has only hundreds of names. Materialised (CREATE TABLE) when the trace
-- is opened, so the kernel view joins a small table instead of re-reading every kernel. The
-- first matching rule (lowest priority) wins; a name no rule matches is `other`.
-- A kernel's name is its demangled name, else (NULL, missing from StringIds, or blank: nothing
-- but spaces, control characters and U+FFFD, as a BLOB of bytes reads by the text policy) its
-- short name, else its mangled name. A kernel with none of them keeps a placeholder
-- (`<kernel name ID>`, or `<unnamed kernel>` without an id) and class `other`: it still counts,
-- but its class is a guess, which `unnamed` marks for the report's data-quality notes. A
-- StringIds id listed twice reads as its smallest value, so no kernel is counted twice.
--
-- Reads: CUPTI_ACTIVITY_KIND_KERNEL, StringIds, kernel_class_rule
--
-- Columns:
--   demangled_key   BIGINT    demangledName, -1 when NULL (the kernel view joins the keys)
--   short_key       BIGINT    shortName, -1 when NULL
--   mangled_key     BIGINT    mangledName, -1 when NULL
--   name_id         BIGINT    StringIds id of the demangled name
--   name            VARCHAR   kernel name (or its placeholder)
--   unnamed         BOOLEAN   no name was found: the class is a guess
--   class           VARCHAR   comm, attention, gemm or other
CREATE TABLE kernel_name AS
WITH ids AS (
    SELECT DISTINCT demangledName, shortName, mangledName FROM CUPTI_ACTIVITY_KIND_KERNEL
),
strings AS (
    SELECT id, min(value) FILTER (WHERE regexp_matches(value, '[^[:space:][:cntrl:]\x{FFFD}]'))
        AS value
    FROM StringIds
    WHERE id IN (SELECT demangledName FROM ids UNION SELECT shortName FROM ids
        UNION SELECT mangledName FROM ids)  -- the regex on kernel names only
    GROUP BY id
),
named AS (
    SELECT ids.*, coalesce(d.value, s.value, m.value) AS value
    FROM ids
    LEFT JOIN strings AS d ON d.id = ids.demangledName
    LEFT JOIN strings AS s ON s.id = ids.shortName
    LEFT JOIN strings AS m ON m.id = ids.mangledName
)
SELECT
    coalesce(named.demangledName, -1) AS demangled_key,
    coalesce(named.shortName, -1) AS short_key,
    coalesce(named.mangledName, -1) AS mangled_key,
    named.demangledName AS name_id,
    coalesce(
        named.value,
        CASE WHEN named.demangledName IS NULL THEN '<unnamed kernel>'
            ELSE '<kernel name ' || named.demangledName || '>' END
    ) AS name,
    named.value IS NULL AS unnamed,
    coalesce(arg_min(r.class, r.priority), 'other') AS class
FROM named
LEFT JOIN kernel_class_rule AS r ON regexp_matches(named.value, r.pattern, 'i')
GROUP BY named.demangledName, named.shortName, named.mangledName, named.value
