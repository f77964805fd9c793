"""One writer per run folder: an exclusive ``flock`` lock that names its holder.

Two runs writing one folder would overwrite each other's stages (one run's S5 deleting the S4 weights the other
had just written).  A run holds a lock per setting while it checks or builds the shared stages, and one per method
folder for a whole chain.  The kernel releases a lock when its process dies; a holder record left by a gone process
means a killed run, whose scratch folders (``.*.tmp``) are removed: safe, as every writer holds the lock.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import psutil
from filelock import FileLock, Timeout

from aclm.base.io import write_json
from aclm.base.runtime import RunError

log = logging.getLogger("aclm.engine.locks")
LOCKS = ".locks"
#: How often a waiting run says again what it waits for.
WAIT_REPORT_S = 60.0


class Busy(RunError):
    """Another live run holds the folder's lock."""


def holder_line(record: dict) -> str:
    return (f"PID {record.get('pid')} on {record.get('host')} since {record.get('started')} "
            f"({record.get('command', '?')})")


def _alive(record: dict) -> bool:
    """Whether the process a holder record names still runs (only knowable on its own host)."""
    return record.get("host") != socket.gethostname() or psutil.pid_exists(int(record.get("pid") or 0))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def remove_scratch(folder: Path) -> int:
    """Delete the scratch folders and files (``.*.tmp``) a killed run left in ``folder``; returns how many."""
    found = list(Path(folder).glob(".*.tmp"))
    for scratch in found:
        shutil.rmtree(scratch, ignore_errors=True) if scratch.is_dir() else scratch.unlink(missing_ok=True)
    if found:
        log.warning("removed %d scratch folder(s) that a killed run left in %s", len(found), folder)
    return len(found)


@contextmanager
def folder_lock(setting: Path, name: str, cleans: Path, wait: bool) -> Iterator[None]:
    """Hold the lock ``name`` of a setting folder, then remove the orphan scratch in ``cleans`` (the folder only its
    holders write); ``wait=False``: a lock held by a live run raises :class:`Busy` naming it."""
    locks = Path(setting) / LOCKS
    locks.mkdir(parents=True, exist_ok=True)
    lock = FileLock(locks / f"{name}.lock", is_singleton=True, preserve_lock_file=True)
    record_path = locks / f"{name}.json"
    _acquire(lock, record_path, wait)
    try:
        if lock.lock_counter == 1:          # not a nested hold of this process: the folder is ours now
            previous = _read(record_path)
            if previous and not _alive(previous):
                log.warning("the lock of %s was left by a run that is gone (%s); taking it over",
                            setting, holder_line(previous))
            try:
                write_json(record_path, {"pid": os.getpid(), "host": socket.gethostname(),
                                         "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                         "command": " ".join(sys.argv)})
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                raise RunError(f"no space left on device: {locks} cannot hold the record of who writes {cleans} "
                               f"(free some space there, or point run_dir= elsewhere)") from None
            remove_scratch(cleans)
        yield
    finally:
        if lock.lock_counter == 1:
            record_path.unlink(missing_ok=True)
        lock.release()


class NoFlock(RunError):
    """The run folder's file system cannot hold the one-writer locks."""


#: What ``flock`` answers on a file system without it (Lustre mounted without ``-o flock``, some FUSE mounts).
NO_FLOCK = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK}


def _acquire(lock: FileLock, record_path: Path, wait: bool) -> None:
    try:
        lock.acquire(timeout=0)
        return
    except Timeout:
        holder = _read(record_path)
    except OSError as err:
        if err.errno not in NO_FLOCK:
            raise
        raise NoFlock(f"{record_path.parent}: this file system does not support flock ({err.strerror}), which "
                      f"keeps two runs from writing one folder: put run_dir on one that does (a local disk, NFSv4, "
                      f"GPFS, or Lustre mounted with -o flock)") from None
    where = record_path.parent.parent
    if not wait:
        raise Busy(f"{where} is being written by another run: {holder_line(holder)}. Wait for it to end, "
                   f"or rerun with --wait") from None
    while True:
        log.warning("waiting for %s: another run writes it (%s)", where, holder_line(holder))
        start = time.monotonic()
        try:
            lock.acquire(timeout=WAIT_REPORT_S)
            log.info("%s is free after %.0f s", where, time.monotonic() - start)
            return
        except Timeout:
            holder = _read(record_path)
