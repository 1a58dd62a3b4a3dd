-- detach_trace: close the trace file the fast loader attached as `nsys`
--
-- Attaching cannot be a file here: DuckDB takes no parameter in ATTACH, and the file's name is
-- the statement's (load._copy_with_scanner).
DETACH nsys
