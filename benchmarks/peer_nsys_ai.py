"""The peer measurement: nsys-ai 0.3.0's per-GPU report (overlap, idle gaps, NCCL) for every GPU.

Usage: PEER_PYTHON benchmarks/peer_nsys_ai.py TRACE (bench_report.py runs it with --peer-python:
a Python with nsys-ai 0.3.0, duckdb 1.5.5 and the duckdb-extension-sqlite-scanner wheel, whose
extension file goes in ~/.duckdb/extensions/v1.5.5/linux_amd64/ so the peer's DuckDB path works
offline). It copies the trace to a fresh folder first (untimed), so every run is cold and the
input is never changed, builds the peer's cache through its default DuckDB path, runs overlap,
idle gaps and NCCL for every GPU, and prints wall seconds and peak RSS as JSON. Figures only.
"""

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

# nsys-ai adds indexes to the SQLite file it opens (the file grows by about 70%), which would
# change the input of every later run: it works on a private copy, made before the clock starts.
work = Path(tempfile.mkdtemp(prefix="peer-nsys-ai-"))
path = work / Path(sys.argv[1]).name
shutil.copyfile(sys.argv[1], path)
t = time.perf_counter()
from nsys_ai.overlap import nccl_breakdown, overlap_analysis  # noqa: E402
from nsys_ai.profile import Profile  # noqa: E402
from nsys_ai.skills.registry import run_skill  # noqa: E402

prof = Profile(str(path))
for device in prof.meta.devices:
    overlap_analysis(prof, device)
    nccl_breakdown(prof, device)
    run_skill("gpu_idle_gaps", prof.query_conn(), raw=True, device=device)
seconds = time.perf_counter() - t
shutil.rmtree(work, ignore_errors=True)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"s": seconds, "rss_mb": rss, "gpus": len(prof.meta.devices)}))
