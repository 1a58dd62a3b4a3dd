"""Plan and write a command's outputs: every location is checked before any work (never an
input, never another output, a folder that takes files), then all are written, or none."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsysreport.errors import OptionError, OutputError

Writer = Callable[[Path], Any]  # writes the whole file at the path it is given
ELSEWHERE = "choose another output path"


@dataclass(frozen=True, slots=True)
class Output:
    """A file a command writes; `option` is how the command line named it (-o, --json, --pdf)."""

    option: str
    path: Path

    def __str__(self) -> str:
        return f"{self.option} {self.path}"


@dataclass(frozen=True, slots=True)
class Input:
    """A file a command reads; `role` names it in messages ("input trace", "baseline")."""

    role: str
    path: Path


def check_outputs(outputs: Sequence[Output], inputs: Sequence[Input]) -> None:
    """Raise OptionError unless every output can be written and none is an input or another
    output. Files are the same when their resolved paths are, or their (device, inode): a hard
    link or a symlink to the trace is the trace, however it is spelled."""
    readers = [(i, *_identity(i.path)) for i in inputs]
    planned: list[tuple[Output, Path, tuple[int, int] | None]] = []
    for out in outputs:
        where, inode = _identity(out.path)
        for inp, inp_where, inp_inode in readers:
            if where == inp_where or (inode is not None and inode == inp_inode):
                raise OptionError(f"{out}: is the {inp.role} {inp.path}; {ELSEWHERE}")
        for other, other_where, other_inode in planned:
            if where == other_where or (inode is not None and inode == other_inode):
                raise OptionError(f"{out}: is also {other}; give each output its own path")
        _check_location(out)
        planned.append((out, where, inode))


def write_all(files: Sequence[tuple[Output, Writer]]) -> None:
    """Write every file to a temporary in its own folder, then rename them all into place.

    A failure while writing (no room, a read-only disk) comes before any rename: every
    temporary is removed and no output changes. Devices and pipes (/dev/null, /dev/stdout)
    are written in place, after the temporaries and before the renames.
    """
    special = [_is_special(out.path) for out, _ in files]
    temps: list[Path] = []
    try:
        staged = []
        for (out, write), in_place in zip(files, special, strict=True):
            if not in_place:
                tmp = _temporary(out)
                temps.append(tmp)
                _fill(out, tmp, write)
                staged.append((out, tmp))
        for (out, write), in_place in zip(files, special, strict=True):
            if in_place:
                try:
                    write(out.path)
                except OSError as exc:
                    raise OutputError(f"{out}: cannot write: {_reason(exc)}") from None
        _rename_all(staged)
    finally:
        for tmp in temps:
            with suppress(OSError):  # the error being raised says more
                tmp.unlink(missing_ok=True)


def _identity(path: Path) -> tuple[Path, tuple[int, int] | None]:
    """The resolved path, and (device, inode) of the file it names, if it exists."""
    try:
        where = path.resolve()
    except RuntimeError:  # a symlink loop (Python < 3.13): never an input, fails on writing
        where = path.absolute()
    try:
        st = path.stat()  # follows symlinks: a link to the trace has the trace's inode
    except OSError:
        return where, None
    return where, (st.st_dev, st.st_ino)


def _check_location(out: Output) -> None:
    """Raise OptionError when `out` is a directory or its folder cannot take a new file."""
    try:
        mode: int | None = out.path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # a missing folder on the way is reported below
    except OSError as exc:
        raise OptionError(f"{out}: cannot write there ({_reason(exc)}); {ELSEWHERE}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OptionError(f"{out}: is a directory; give a file name inside it")
    if mode is not None and not stat.S_ISREG(mode):
        return  # a device or a pipe: written in place
    folder = out.path.parent
    try:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # missing folders are made when writing
        if not folder.is_dir():
            raise OptionError(f"{out}: {folder} is not a directory; {ELSEWHERE}")
        # A real file, not os.access: root on a read-only disk, ACLs and quotas answer truly.
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".nsysreport-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:  # PermissionError: a folder on the way that may not be searched
        raise OptionError(f"{out}: cannot write there ({_reason(exc)}); {ELSEWHERE}") from None


def _is_special(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _temporary(out: Output) -> Path:
    """A new empty file beside `out` (its folders made first)."""
    try:
        out.path.parent.mkdir(parents=True, exist_ok=True)
        # The name is cut so that a long output name still leaves room for the temporary's.
        fd, name = tempfile.mkstemp(
            dir=out.path.parent, prefix=f".{out.path.name[:64]}.", suffix=".tmp"
        )
    except OSError as exc:
        raise OutputError(f"{out}: cannot write there ({_reason(exc)})") from None
    os.close(fd)
    return Path(name)


def _fill(out: Output, tmp: Path, write: Writer) -> None:
    """Write `out`'s content to `tmp`, readable as any new file and flushed to disk."""
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # mkstemp makes 0600; a report is as readable as any file
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # a crash after the rename leaves the whole file, not an empty one
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # a disk that cannot sync
                raise
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write: {_reason(exc)}") from None


def _rename_all(staged: Sequence[tuple[Output, Path]]) -> None:
    """Rename every temporary into place; when one fails, remove those renamed before it."""
    done: list[Path] = []
    for out, tmp in staged:
        try:
            tmp.replace(out.path)
        except OSError as exc:
            for path in done:
                with suppress(OSError):
                    path.unlink(missing_ok=True)
            raise OutputError(f"{out}: cannot write: {_reason(exc)}") from None
        done.append(out.path)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
