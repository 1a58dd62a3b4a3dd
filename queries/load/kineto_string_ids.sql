-- kineto_string_ids: the kernel and CUDA API names into StringIds
--
-- Names as nsys exports hold them after the loader's text policy: no NUL bytes.
--
-- Reads: kineto_string
-- Writes: StringIds
INSERT INTO StringIds (id, value) SELECT id, replace(name, chr(0), '') FROM kineto_string
