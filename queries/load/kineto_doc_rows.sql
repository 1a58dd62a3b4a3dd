-- kineto_doc_rows: whether the JSON document is one object with a traceEvents list
--
-- A Kineto trace is; anything else (a list, a document without traceEvents) is not one.
--
-- Reads: kineto_doc
SELECT count(*) AS documents, count(traceEvents) AS with_events FROM kineto_doc
