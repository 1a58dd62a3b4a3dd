-- nvtx_op_call: nvtx_op_call(...) and its parts, whether an NVTX row is an op call with shapes
--
-- PyTorch's emit_nvtx(record_shapes=True) pushes one range per operator call, its inline text
-- `aten::mm, seq = 12, op_id = 345, sizes = [[64, 128], [128, 256]], input_op_ids = [(342,0),
-- (343,0)]` (docs/export-format.md, "PyTorch emit_nvtx ranges": no dtypes; a scalar, None or
-- empty-list input's size is `[]`). nvtx_op_call: whether an NVTX row is such a call whose
-- operator (nvtx_op_name: the text up to its first comma) is one of `ops`
-- (nsysreport.flops.SHAPED_OPS): a closed push/pop or start/end range on one thread (as
-- nvtx_roleless), inline text (never a registered string), and sizes that read as a whole
-- list of integer lists, followed by `, ` or the end of the text. nvtx_op_dims: those sizes
-- as JSON text ("[[64, 128], [128, 256]]", as PyTorch writes them), '' when the text has none,
-- or they are malformed or cut off (such a range is no op call: skipped, never an error).
-- `txt` may hold NUL bytes (the file's text): each part reads it as loaded (nvtx_text: NUL
-- bytes removed, as every loader removes them), so every loader finds the same calls.
--
-- Macros, expanded in place. Cost, measured over 4M op texts in memory (2 threads): replace()
-- 4.6 s where the test for a NUL is 0.3 s; split_part for the name 2.0 s, strpos and substr
-- 0.6 s; a regular expression searching the whole text 3.4 s, the one anchored at the sizes
-- 0.7 s. The CASE keeps DuckDB from rewriting the test of the sizes into range filters that
-- evaluate it more than once (6.1 s against 2.1 s).
--
-- Writes: nvtx_text, nvtx_op_name, nvtx_op_dims, nvtx_op_text, nvtx_op_candidate, nvtx_op_call
CREATE OR REPLACE TEMP MACRO nvtx_text(txt) AS
    CASE WHEN contains(txt, chr(0)) THEN replace(txt, chr(0), '') ELSE txt END;
CREATE OR REPLACE TEMP MACRO nvtx_op_name(txt) AS substr(txt, 1, strpos(txt, ',') - 1);
CREATE OR REPLACE TEMP MACRO nvtx_op_dims(txt) AS regexp_extract(
    substr(txt, strpos(txt, ', sizes = [') + 10),
    '^(\[(?:\[(?:-?\d+(?:, -?\d+)*)?\](?:, \[(?:-?\d+(?:, -?\d+)*)?\])*)?\])(?:, |$)',
    1
);
CREATE OR REPLACE TEMP MACRO nvtx_op_text(txt, ops) AS contains(txt, ', sizes = [')
    AND list_contains(ops, nvtx_op_name(txt)) AND nvtx_op_dims(txt) <> '';
CREATE OR REPLACE TEMP MACRO nvtx_op_candidate(txt, ops) AS CASE
    WHEN contains(txt, chr(0)) THEN true
    ELSE contains(txt, ', sizes = [') AND list_contains(ops, nvtx_op_name(txt)) END;
CREATE OR REPLACE TEMP MACRO nvtx_op_call(event_type, end_ns, end_tid, tid, text_id, txt, ops)
AS event_type IN (59, 60, 70, 71) AND end_ns IS NOT NULL
    AND (end_tid IS NULL OR end_tid = tid)
    AND text_id IS NULL AND txt IS NOT NULL
    AND CASE WHEN contains(txt, chr(0)) THEN nvtx_op_text(replace(txt, chr(0), ''), ops)
        ELSE nvtx_op_text(txt, ops) END
