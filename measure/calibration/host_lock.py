"""One calibration at a time on a host, across processes.

Two runs on one GPU share its streaming multiprocessors and its memory bandwidth, so each
measures a fraction of the real rates and neither can tell. `exclusive_calibration()`
holds a lock file for the whole run; a second run, from any process, fails at once with
`CalibrationBusyError` naming the holder's pid.

The lock is `filelock.FileLock`: flock(2) on Linux and macOS, msvcrt.locking on Windows.
The kernel drops an flock when the holding process exits, killed or crashed included
(flock(2) man page), so a dead run never leaves the host locked. The holder writes its pid
to `<lock>.owner` for the message; that file is informational only.

Where the lock lives: `$GPU_SIZING_CALIBRATION_LOCK`, else `calibration.lock` in the folder
of the calibration store (`$GPU_SIZING_CALIBRATION_DB`, default ~/.cache/gpu-sizing/, also where a
host whose store is a database server keeps it: the lock is per host, the store may be the fleet's). Runs
that use stores in different folders lock different files: point them at one shared
`GPU_SIZING_CALIBRATION_LOCK` to exclude each other.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from filelock import FileLock, Timeout

from measure.calibration.store import local_folder

LOCK_ENV_VAR = "GPU_SIZING_CALIBRATION_LOCK"
LOCK_FILE_NAME = "calibration.lock"

# flock(2) locks belong to an open file, so two threads of one process with their own
# FileLock objects already exclude each other; this lock makes the in-process case cheap
# and keeps its message exact.
_IN_PROCESS = threading.Lock()


class CalibrationBusyError(RuntimeError):
    """Another calibration holds this host's lock, or the lock cannot be taken; one-line message."""


def default_lock_path(environ: Mapping[str, str] | None = None) -> Path:
    """$GPU_SIZING_CALIBRATION_LOCK, else calibration.lock next to the SQLite store (or in ~/.cache/gpu-sizing)."""
    environ = os.environ if environ is None else environ
    configured = environ.get(LOCK_ENV_VAR)
    return Path(configured) if configured else local_folder(dict(environ)) / LOCK_FILE_NAME


def _owner_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".owner")


def _holder(lock_path: Path) -> str:
    """'pid 1234' from the holder's owner file, or 'pid unknown' while it is not written yet."""
    try:
        pid = _owner_path(lock_path).read_text().strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"


@contextlib.contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    """Hold the lock file for the block, or raise CalibrationBusyError without waiting."""
    lock = FileLock(lock_path)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)  # one attempt (filelock: a timeout of 0 never waits)
    except Timeout:
        raise CalibrationBusyError(
            f"another calibration is running on this host ({_holder(lock_path)}, lock {lock_path}); "
            "wait for it to finish"
        ) from None
    except OSError as error:
        raise CalibrationBusyError(
            f"cannot take the calibration lock {lock_path} ({error.strerror}); "
            f"set {LOCK_ENV_VAR} to a file in a writable folder"
        ) from None
    owner = _owner_path(lock_path)
    try:
        with contextlib.suppress(OSError):  # the pid is for the message only
            owner.write_text(f"{os.getpid()}\n")
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()


@contextlib.contextmanager
def exclusive_calibration(lock_path: Path | None = None) -> Iterator[None]:
    """Run the block as the host's only calibration; CalibrationBusyError at once otherwise."""
    if not _IN_PROCESS.acquire(blocking=False):
        raise CalibrationBusyError("a calibration is already running in this process; wait for it to finish")
    try:
        with _file_lock(lock_path or default_lock_path()):
            yield
    finally:
        _IN_PROCESS.release()
