-- nsys_text: nsys_text(BLOB) -> VARCHAR, the loader's text policy for the careful read
--
-- Any bytes load: valid UTF-8 (nearly every value) is decoded by DuckDB, the rare rest by
-- nsys_decode_rest, a Python function load._text_functions registers first (invalid sequences
-- as U+FFFD); NUL bytes are removed.
--
-- Writes: nsys_text
CREATE OR REPLACE TEMP MACRO nsys_text(b) AS
replace(coalesce(try(decode(b)), nsys_decode_rest(b)), chr(0), '')
