"""The cache folder's files: where they live, what they are called (keys on the trace's
content, the options and the code), and removing stale ones; nsysreport.trace_cache keeps loaded
tables there, nsysreport.cache finished report models."""

from __future__ import annotations

import hashlib
import os
import re
import time
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from nsysreport import __version__
from nsysreport.errors import TraceError
from nsysreport.queries import resource_dir

if TYPE_CHECKING:
    from nsysreport.patterns import Patterns

# Bump when the cached tables or the report file change shape (a new column, a new derived
# table): old files then miss and are replaced. The tool version is in the key too, so releases
# never share files.
CACHE_FORMAT = 5
DB_SUFFIX = ".duckdb"
REPORT_SUFFIX = ".report"
# The sample of a trace's bytes in its key (see _content_digest).
EDGE_BYTES = 64 << 10
CHUNK_BYTES = 4 << 10
SAMPLES = 16
# A temporary left by a killed run (its pid in the name is gone, or it names none: every run of
# this code names its own, so one without was left by other code) is removed after an hour; one
# whose pid cannot be judged (another machine sharing the folder, a reused pid) after a day. A
# live run's temporary removed by mistake costs that run only its cache: its rename fails and
# it loads into memory.
STALE_SECONDS = 3600
ABANDONED_SECONDS = 86400
TEMP_NAME = re.compile(r"\.[0-9a-f-]+\.(\d+)\.\w+\.tmp(\.wal)?")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/nsysreport, else ~/.cache/nsysreport: never beside or inside the trace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsysreport"


def cache_path(trace: Path, patterns: Patterns) -> Path:
    """The cache file for this trace as it is now (path, size, mtime, sampled content) and
    these options."""
    try:
        stat = trace.stat()
        content = content_key(trace)
        logs = [] if trace.is_dir() else _logs_beside(trace)
    except OSError as exc:
        raise TraceError(f"{trace}: cannot read it ({exc.strerror})") from None
    where = digest(str(trace.resolve()))
    # The code's digest too: a checkout that edits a view must not read tables the old SQL made.
    what = digest(
        str(stat.st_size),
        str(stat.st_mtime_ns),
        content,
        *logs,
        str(CACHE_FORMAT),
        __version__,
        repr(patterns),
        _code_fingerprint(),
    )
    return cache_dir() / f"{where}-{what}{DB_SUFFIX}"


def digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def content_key(path: Path) -> str:
    """A digest of a trace's content: a file's sampled bytes (_content_digest); a folder's
    (an nsys Parquet export) each file's name, size, mtime and sampled bytes."""
    if not path.is_dir():
        return _content_digest(path, path.stat().st_size)
    parts = []
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        stat = f.stat()
        parts += [
            f.name,
            str(stat.st_size),
            str(stat.st_mtime_ns),
            _content_digest(f, stat.st_size),
        ]
    return digest(*parts)


def _content_digest(path: Path, size: int) -> str:
    """A digest of a sample of the file's bytes: the first and last 64 KiB and SAMPLES chunks
    of 4 KiB evenly between. Another trace of the same size and mtime (cp -p, rsync -t)
    differs in them: the SQLite header's change counter, the schema, the first and last pages
    of the tables. 18 reads whatever the size (1 GB file: 0.2 ms from the page cache, ~20 ms
    from a cold virtual disk)."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        sha.update(f.read(EDGE_BYTES))
        for i in range(1, SAMPLES + 1):
            f.seek(size * i // (SAMPLES + 1))
            sha.update(f.read(CHUNK_BYTES))
        f.seek(max(size - EDGE_BYTES, 0))
        sha.update(f.read(EDGE_BYTES))
    return sha.hexdigest()[:16]


def _logs_beside(trace: Path) -> list[str]:
    """Size, mtime and sampled content of a -wal or -journal beside the trace: the loader reads
    the trace with its log applied (trace_file.py), so a log that appears or grows is new
    content."""
    parts = []
    for suffix in ("-wal", "-journal"):
        log = trace.with_name(trace.name + suffix)
        try:
            stat = log.stat()
        except FileNotFoundError:
            continue
        parts += [suffix, str(stat.st_size), str(stat.st_mtime_ns)]
        parts.append(_content_digest(log, stat.st_size))
    return parts


@cache
def _code_fingerprint() -> str:
    """A digest of what the tables and outputs are made by: the package's Python, the SQL and
    the templates (a checkout edits them without a new version number)."""
    files = sorted(Path(__file__).parent.rglob("*.py"))
    for folder in ("queries", "templates"):
        files += sorted(p for p in resource_dir(folder).rglob("*") if p.is_file())
    sha = hashlib.sha256()
    for f in files:
        sha.update(f.name.encode())
        sha.update(f.read_bytes())
    return sha.hexdigest()[:16]


def temp_prefix(target: Path) -> str:
    """`.NAME.PID.`: a temporary names the run that writes it, so that a later run can tell
    when it was left by a run that died."""
    return f".{target.stem}.{os.getpid()}."


def remove_stale(folder: Path) -> None:
    """Remove the temporaries of runs killed before their rename (kill -9, a power cut)."""
    now = time.time()
    for tmp in folder.glob(".*.tmp*"):
        match = TEMP_NAME.fullmatch(tmp.name)
        try:
            age = now - tmp.stat().st_mtime
        except OSError:
            continue  # removed meanwhile
        gone = match is None or not _running(int(match.group(1)))
        if age > ABANDONED_SECONDS or (gone and age > STALE_SECONDS):
            with suppress(OSError):
                tmp.unlink()


def _running(pid: int) -> bool:
    """Whether a process with this pid exists here (another user's counts)."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would signal it there: judge by age alone
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, owned by someone else
    return True


def drop_older(current: Path) -> None:
    """Remove this trace's caches (tables and reports) for earlier versions of the file or other
    patterns, and stale temporaries; reports of the same version with other model options stay."""
    where, what = current.name.split("-")[:2]
    what = what.removesuffix(DB_SUFFIX)
    for suffix in (DB_SUFFIX, REPORT_SUFFIX):
        for other in current.parent.glob(f"{where}-*{suffix}"):
            if other.name.split("-")[1].removesuffix(suffix) != what:
                with suppress(OSError):
                    other.unlink(missing_ok=True)
    remove_stale(current.parent)


def clear() -> int:
    """Delete every cache file; returns how many there were."""
    folder = cache_dir()
    patterns = (f"*{DB_SUFFIX}", f"*{REPORT_SUFFIX}", ".*.tmp*")
    files = [f for p in patterns for f in folder.glob(p)] if folder.is_dir() else []
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)
