-- kineto_doc: the Kineto trace's JSON document, one row, read by DuckDB's JSON reader
--
-- The columns are the parts of the document the loader reads; traceEvents keeps `ts` and
-- `dur` as text (microseconds with up to three decimals: kineto_event scales them exactly) and
-- `name` and `args` as JSON. The metadata beside the events are JSON of any shape: each step
-- that reads one reads nothing from a value of another shape (deviceProperties that is no
-- list). DuckDB reads the whole document as one object, into buffers sized by
-- maximum_object_size (twice over for a compressed file), set from the document's real size
-- (kineto.copy_kineto raises DuckDB's memory limit for the read when one document needs more).
-- The file's name and the size are parameters; the columns are the loader's, a constant.
--
-- Writes: kineto_doc
--
-- Params:
--   $path  VARCHAR  -  the trace file (or a private copy decoded as UTF-8 with U+FFFD)
--   $size  BIGINT   -  the document's size in bytes, plus 1 MiB, at most 4 GiB - 1
CREATE TEMP TABLE kineto_doc AS
SELECT * FROM read_json(
    $path,
    columns = {
        'traceEvents': 'STRUCT(ph VARCHAR, cat VARCHAR, name JSON, pid VARCHAR, tid VARCHAR, '
            'ts VARCHAR, dur VARCHAR, args JSON)[]',
        'deviceProperties': 'JSON',
        'distributedInfo': 'JSON',
        'schemaVersion': 'JSON',
        'pytorch_version': 'JSON',
        'hostname': 'JSON'
    },
    format = 'unstructured',
    maximum_object_size = $size
)
