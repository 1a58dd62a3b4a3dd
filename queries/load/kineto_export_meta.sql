-- kineto_export_meta: what wrote the trace, as nsys's export metadata names it
--
-- The product is the PyTorch profiler (Kineto); its version is PyTorch's, else the trace's
-- schemaVersion.
--
-- Reads: kineto_doc
-- Writes: META_DATA_EXPORT
INSERT INTO META_DATA_EXPORT (name, value)
SELECT 'EXPORT_PRODUCT_NAME', 'PyTorch profiler (Kineto)'
UNION ALL
SELECT 'EXPORT_PRODUCT_VERSION', coalesce(pytorch_version->>'$', schemaVersion->>'$')
FROM kineto_doc
