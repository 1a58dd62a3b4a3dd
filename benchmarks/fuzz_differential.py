"""The long differential fuzz run (issue #39): mutations whose effect on the numbers is known
(tests/fuzzing/differential.py), each case held to its reference; prints a table per mutation,
the failures by kind, and every failing case's repro; exits 1 on any failure.

Usage:
  python benchmarks/fuzz_differential.py --cases 10000 --jobs 2   # the long run, seed 0
  python benchmarks/fuzz_differential.py --seed 7 --cases 500     # a held-out run
  python benchmarks/fuzz_differential.py --seed 0 --case 123      # one case again
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzzing.differential import Result, plan, run_case

_WORKDIR: Path | None = None


def _start_worker(root: str) -> None:
    global _WORKDIR
    _WORKDIR = Path(tempfile.mkdtemp(dir=root))


def _run(job: tuple[int, int]) -> tuple[Result, float]:
    assert _WORKDIR is not None
    began = time.perf_counter()
    result = run_case(_WORKDIR, *job)
    return result, time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    parser.add_argument("--cases", type=int, default=1000, help="cases (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--case", type=int, action="append", help="only this index (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = parser.parse_args()
    indices = args.case or list(range(args.start, args.start + args.cases))
    root = tempfile.mkdtemp(prefix="nsysreport-differential-")
    began = time.perf_counter()
    table: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    kinds: Counter[str] = Counter()
    failed: list[Result] = []
    try:
        with multiprocessing.Pool(args.jobs, _start_worker, (root,)) as pool:
            jobs = [(args.seed, i) for i in indices]
            for done, (result, seconds) in enumerate(pool.imap_unordered(_run, jobs), 1):
                mutation = plan(*map(int, result.case.split(":")))[1]
                row = table[mutation]
                row[0] += 1
                row[1] += bool(result.failures)
                row[2] += seconds
                if result.failures:
                    failed.append(result)
                    kinds.update(f.split(":")[0] for f in result.failures)
                if done % 500 == 0:
                    elapsed = time.perf_counter() - began
                    print(f"  {done} cases, {len(failed)} failed, {elapsed:.0f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = time.perf_counter() - began
    print(f"\n{'mutation':22} {'cases':>6} {'failed':>6} {'seconds':>8}")
    for mutation, (n, bad, secs) in sorted(table.items()):
        print(f"{mutation:22} {n:6.0f} {bad:6.0f} {secs:8.1f}")
    print(f"{'all':22} {len(indices):6} {len(failed):6} {total:8.1f} (wall, {args.jobs} jobs)")
    print(f"seed {args.seed}; failures by kind: {dict(kinds) or 'none'}")
    for result in sorted(failed, key=lambda r: int(r.case.split(":")[1])):
        seed, index = result.case.split(":")
        print(f"\npython benchmarks/fuzz_differential.py --seed {seed} --case {index}")
        print(f"  {result.what}")
        for failure in result.failures:
            print(f"    {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
