-- connection_settings: settings of every DuckDB connection nsysreport opens
--
-- The rest are connection options (database.connect). DuckDB's progress bar would draw on the
-- terminal in the middle of nsysreport's own progress lines.
SET enable_progress_bar = false
