-- kernel_class_rule: the kernel-name patterns (--kernel-class and the defaults) as a table
--
-- Patterns are data, never SQL text: kernel_name joins this table and takes, for each kernel,
-- the class of the first rule (lowest priority number) whose case-insensitive pattern matches.
-- The three lists are one rule per position (unnest in one SELECT walks them side by side).
-- Replaced each time the views are created.
--
-- Writes: kernel_class_rule
--
-- Params:
--   $priorities  INTEGER[]  -  each rule's position, 0 = the first rule
--   $classes     VARCHAR[]  -  each rule's class (comm, attention, gemm, ...)
--   $patterns    VARCHAR[]  -  each rule's regular expression
CREATE OR REPLACE TABLE kernel_class_rule AS
SELECT unnest($priorities::INTEGER[]) AS priority,
    unnest($classes::VARCHAR[]) AS class,
    unnest($patterns::VARCHAR[]) AS pattern
