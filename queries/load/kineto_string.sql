-- kineto_string: an id for each distinct kernel and CUDA API name, as nsys's StringIds
--
-- Reads: kineto_event
-- Writes: kineto_string
CREATE TEMP TABLE kineto_string AS
SELECT row_number() OVER (ORDER BY name) AS id, name
FROM (
    SELECT DISTINCT name FROM kineto_event
    WHERE name IS NOT NULL AND cat IN ('kernel', 'cuda_runtime', 'cuda_driver')
)
