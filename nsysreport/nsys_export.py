"""An Nsight Systems report (`.nsys-rep`, `.qdrep`) exported by the `nsys` on PATH, once, into
the cache folder (never beside the report): its Parquet export where that nsys writes one
(2024.6 and later), else its SQLite export. nsysreport then reads the export as it reads one
the user made, and names the report in every output."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import suppress
from pathlib import Path

from nsysreport.cache_files import cache_dir, content_key, digest
from nsysreport.errors import TraceError
from nsysreport.parquet_dir import is_parquet_dir

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_NAME = "trace"  # nsys writes trace/ (or trace_pqtdir/, some releases) or trace.sqlite
DONE = "export.done"  # names the export inside a finished folder


def is_report(path: Path) -> bool:
    return path.suffix in REPORT_SUFFIXES


def nsys_command() -> str | None:
    """The nsys on PATH, None when there is none."""
    return shutil.which("nsys")


def exported(report: Path) -> Path:
    """The export of `report` in the cache: made now when missing (or when the report changed
    since), reused after; a one-line TraceError when nsys cannot export it."""
    nsys = nsys_command()
    if nsys is None:
        raise TraceError(f"{report}: nsys is not on PATH to export it")
    try:
        stat = report.stat()
        key = digest(str(report.resolve()), str(stat.st_size), str(stat.st_mtime_ns),
                     content_key(report))  # fmt: skip
    except OSError as exc:
        raise TraceError(f"{report}: cannot read it ({exc.strerror})") from None
    folder = cache_dir() / "exports" / key
    done = folder / DONE
    if done.is_file():
        return folder / done.read_text(encoding="utf-8").strip()
    work = folder.with_name(f".{key}.{os.getpid()}.tmp")
    try:
        work.mkdir(parents=True, exist_ok=True)
        name = _export(nsys, report, work)
        (work / DONE).write_text(name, encoding="utf-8")
        with suppress(OSError):
            shutil.rmtree(folder)  # an unfinished folder of an earlier run
        work.rename(folder)
    except OSError as exc:
        raise TraceError(
            f"{report}: cannot export it into {cache_dir()} ({exc.strerror or exc}); export it "
            f"yourself: nsys export --type sqlite --output trace.sqlite {report.name}"
        ) from None
    finally:
        with suppress(OSError):
            shutil.rmtree(work)
    return folder / name


def _export(nsys: str, report: Path, work: Path) -> str:
    """Run nsys export into `work`: Parquet first, SQLite when this nsys has no Parquet
    export; returns the export's name in `work`."""
    common = ["--force-overwrite", "true", str(report)]
    parquet = _run([nsys, "export", "--type", "parquetdir", "--output", str(work / EXPORT_NAME),
                    *common])  # fmt: skip
    for name in (EXPORT_NAME, f"{EXPORT_NAME}_pqtdir"):
        if parquet is None and is_parquet_dir(work / name):
            return name
    sqlite = f"{EXPORT_NAME}.sqlite"
    failed = _run([nsys, "export", "--type", "sqlite", "--output", str(work / sqlite), *common])
    if failed is None and (work / sqlite).is_file():
        return sqlite
    raise TraceError(
        f"{report}: nsys could not export it ({failed or parquet or 'it wrote nothing'}); "
        "is it a complete report of a finished capture?"
    )


def _run(command: list[str]) -> str | None:
    """None when the command succeeded, else the last line it printed (its reason)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        return exc.strerror or str(exc)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"
