"""The long fuzz run: thousands of mutated traces and surroundings, each held to nsysreport's
promises; prints a table per family and every failure's one-line repro; exits 1 on any failure.

Usage:
  python benchmarks/fuzz.py [--seed 0] [--cases 2000] [--jobs 1]   # a run over every family
  python benchmarks/fuzz.py --seed 7 --family values --cases 300   # one family
  python benchmarks/fuzz.py --seed 0 --case values:17 --keep       # one case, folder kept
  python benchmarks/fuzz.py --list --cases 50                      # what would run
A held-out run uses other seeds (--seed): the same families, other mutations.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fuzzing
from fuzzing.pool import prepare, run_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0; CI uses 0)")
    parser.add_argument("--cases", type=int, default=2000, help="cases in all (default 2000)")
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--case", action="append", help="only FAMILY:INDEX (repeatable)")
    parser.add_argument("--start", type=int, default=0, help="first index of each family")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per case")
    parser.add_argument("--keep", action="store_true", help="keep the workspace and case folders")
    parser.add_argument("--ci", action="store_true", help="the cases tests/test_fuzz.py runs")
    parser.add_argument("--list", action="store_true", help="print the cases, run nothing")
    parser.add_argument("--verbose", "-v", action="store_true", help="a line per case")
    args = parser.parse_args()

    if args.ci:
        jobs = [(args.seed, f, i) for f, n in fuzzing.ci_slice().items() for i in range(n)]
    elif args.case:
        jobs = [(args.seed, c.split(":")[0], int(c.split(":")[1])) for c in args.case]
    else:
        counts = fuzzing.spread(args.cases)
        families = args.family or list(counts)
        if args.family:
            counts = {f: max(1, args.cases // len(families)) for f in families}
        jobs = [(args.seed, f, args.start + i) for f in families for i in range(counts[f])]
    root = Path(tempfile.mkdtemp(prefix="nsysreport-fuzz-"))
    root.chmod(0o755)
    try:
        if args.list:
            ctx = fuzzing.Context(root)
            for seed, family, index in jobs:
                print(fuzzing.plan(ctx, seed, family, index).repro())
            return 0
        return run(root, jobs, args)
    finally:
        if args.keep:
            print(f"workspace kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, jobs: list[tuple[int, str, int]], args: argparse.Namespace) -> int:
    started = time.perf_counter()
    prepare(root)
    print(f"seeds and baselines: {time.perf_counter() - started:.1f} s; {len(jobs)} cases")
    per_family: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    by_category: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    failed = []
    for outcome in run_all(root, jobs, args.timeout, args.jobs, args.keep):
        family = outcome.case.split(":")[0]
        row = per_family[family]
        row[0] += 1
        row[1] += bool(outcome.failures)
        row[2] += outcome.seconds
        if outcome.failures:
            failed.append(outcome)
            for category in dict.fromkeys(c for c, _ in outcome.failures):
                detail = next(d for c, d in outcome.failures if c == category)
                by_category[(family, category)].append((outcome.repro, detail))
        if args.verbose or (outcome.failures and args.case):
            mark = "FAIL" if outcome.failures else "ok"
            print(f"{mark:4} {outcome.seconds:5.1f}s {outcome.repro}")
            for category, detail in outcome.failures:
                print(f"       {category}: {detail}")
    total = time.perf_counter() - started
    print(f"\n{'family':12} {'cases':>6} {'failed':>6} {'seconds':>8} {'cases/s':>8}")
    for family, (n, bad, secs) in per_family.items():
        print(f"{family:12} {n:6.0f} {bad:6.0f} {secs:8.1f} {n / max(secs, 1e-9):8.2f}")
    n = sum(r[0] for r in per_family.values())
    print(f"{'all':12} {n:6} {len(failed):6} {total:8.1f} {n / total:8.2f}")
    if by_category:
        print("\nFailures by family and category (count, first repro, its symptom):")
        for (family, category), items in sorted(by_category.items()):
            repro, detail = items[0]
            print(f"\n[{family}] {category}: {len(items)} case(s)\n  {repro}\n    -> {detail}")
        print("\nEvery failing case:")
        for outcome in failed:
            print(outcome.repro)
            for category, detail in outcome.failures:
                print(f"    {category}: {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
