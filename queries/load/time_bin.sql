-- time_bin: the macros of joins by time bin, one definition for every query that uses them
--
-- A join of intervals with a time condition and only the GPU (or process) as equality
-- compares every row with every row of its GPU: quadratic in steps or pieces. Instead both
-- sides are listed in the time bins they span and joined on (GPU, bin); a pair that overlaps
-- is counted once, in the bin where its overlap starts (bin = instant // width). Floor
-- division is monotonic, so an interval's bins hold every instant inside it.
-- time_bin_width(lo, hi, n): a width about as long as one of n intervals spread over
-- [lo, hi), at least 1; the span is taken as HUGEINT, since extreme times overflow BIGINT.
-- time_bins(start, end, width): the bins [start, end) spans (end > start). Used by
-- step_window_bin, activity_step, activity_range, grouped_island and step_breakdown.
-- Created with the views (nsysreport.queries.create_views), so a cache file keeps them
-- beside the views that use them.
--
-- Writes: time_bin_width, time_bins
CREATE OR REPLACE MACRO time_bin_width(lo, hi, n) AS
    least(greatest((hi::HUGEINT - lo) // n, 1), 9223372036854775807)::BIGINT;
CREATE OR REPLACE MACRO time_bins(start_ns, end_ns, width) AS
    range(start_ns // width, (end_ns - 1) // width + 1);
