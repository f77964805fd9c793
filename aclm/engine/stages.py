"""A stage: one output folder, built in scratch and renamed into place with its stamp, skipped while current.

``@stage(name, place=..., keys=(...))`` over ``build(c, out, **upstream) -> facts`` declares one.  Called, it
builds its folder unless its stamp (``_stage.json``) holds the identity it has now (:mod:`aclm.engine.identity`)
and the folder still holds the files it wrote.  Pruned weights (:func:`prune`) keep a stage current; one that
``loads`` them and must run raises :class:`Pruned`.  Inside ``planning()`` the first stale stage raises
:class:`Stale` instead of building.
"""

from __future__ import annotations

import errno
import logging
import shutil
import time
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence

from aclm.base import tensorboard
from aclm.base.dicts import config_hash, to_dict
from aclm.base.io import atomic_dir, read_json, write_json
from aclm.base.runtime import RunError, cpu_threads
from aclm.base.signals import check_interrupted
from aclm.engine import memory
from aclm.engine.code import checkout, code_digests, edited_while_running, hardware
from aclm.engine.identity import (HUB_REVISION, STAMP, differences, folder_digests, hashed, identity, model_reads,
                                  view)

PRUNED = "_pruned.json"
WEIGHT_PATTERNS = ("best-model.pt", "*.safetensors", "pytorch_model*.bin")
log = logging.getLogger("aclm.engine")
_planning: ContextVar[bool] = ContextVar("planning", default=False)


class Stale(Exception):
    """Raised in ``planning()`` by the first stage whose outputs are not current, with why."""

    def __init__(self, stage_name: str, reason: str) -> None:
        super().__init__(f"{stage_name} is not current ({reason})")
        self.stage_name, self.reason = stage_name, reason


class Pruned(Exception):
    """A stage that must run needs files of an upstream stage that were pruned."""

    def __init__(self, stage_dir: Path) -> None:
        super().__init__(f"{stage_dir} was pruned (its model weights deleted) and is needed again")
        self.stage_dir = Path(stage_dir)


class NotKept(RunError):
    """A stage's output is not stamped: the disk filled, or what made it cannot be named."""


@contextmanager
def planning() -> Iterator[None]:
    token = _planning.set(True)
    try:
        yield
    finally:
        _planning.reset(token)


def in_planning() -> bool:
    return _planning.get()


def stamp(out_dir: Path) -> dict:
    """A finished stage's ``_stage.json``."""
    return read_json(Path(out_dir) / STAMP)


def pruned_files(out_dir: Path) -> dict[str, str]:
    """The files :func:`prune` deleted from a stage folder, with their digests (empty if none)."""
    path = Path(out_dir) / PRUNED
    return read_json(path) if path.exists() else {}


def _listing(out_dir: Path) -> dict[str, str]:
    """Every file a stage wrote, by content (its stamp, its own records and TensorBoard's events aside)."""
    return folder_digests(out_dir, skip=(STAMP, PRUNED, tensorboard.FOLDER))


def folder_bytes(out_dir: Path) -> int:
    """The bytes of the files a stage folder holds now (its stamp and records aside)."""
    return sum(p.stat().st_size for p in Path(out_dir).rglob("*")
               if p.is_file() and p.relative_to(out_dir).parts[0] not in (STAMP, PRUNED))


def prune(out_dir: Path, patterns: Sequence[str] = WEIGHT_PATTERNS) -> int:
    """Delete a finished stage's files matching ``patterns`` (never inside ``planning()``); returns the bytes
    freed.  The stamp stays, so the stages after it stay current."""
    out_dir = Path(out_dir)
    if _planning.get():
        return 0
    gone = {p: p.stat().st_size for pattern in patterns for p in out_dir.rglob(pattern) if p.is_file()}
    if gone:
        written = stamp(out_dir)["outputs"]
        write_json(out_dir / PRUNED, {**pruned_files(out_dir),
                                      **{str(p.relative_to(out_dir)): written[str(p.relative_to(out_dir))]
                                         for p in gone}})
        for path in gone:
            path.unlink()
        log.info("pruned %s: %.1f MB of model weights", out_dir, sum(gone.values()) / 1e6)
    return sum(gone.values())


def why_stale(out_dir: Path, now: dict, defaults: Mapping[str, Any] = {}) -> str | None:
    """Why ``out_dir`` must be built for identity ``now`` (None: it is current)."""
    if not (Path(out_dir) / STAMP).exists():
        return "new"
    before = stamp(out_dir)
    if "identity" not in before or not isinstance(next(iter(before["outputs"].values()), ""), str):
        return "stamped by an older version of the project"
    reason = differences(before["identity"], now, defaults)
    if reason is None and {**_listing(Path(out_dir)), **pruned_files(out_dir)} != before["outputs"]:
        reason = "its files were changed or deleted"
    return reason


def _with_downloads(name: str, now: dict) -> dict:
    """``now`` with each hub model the build downloaded stamped at the revision it read; a newer download
    while the stage ran leaves no telling which it read."""
    hub = {k: v for k, v in now.get("reads", {}).items() if isinstance(v, dict) and set(v) == {HUB_REVISION}}
    after = model_reads(now["config"]) if hub else {}
    if any(v[HUB_REVISION] is not None and after.get(k) != v for k, v in hub.items()):
        raise NotKept(f"{name}: a newer revision of a hub model it read reached the Hugging Face cache while it "
                      f"ran, so which one it read is unknown and its output is not kept: run again")
    return {**now, "reads": {**now.get("reads", {}), **{k: after.get(k, v) for k, v in hub.items()}}}


def run_stage(name: str, out_dir: Path, config: Mapping, inputs: Sequence[Path], build: Callable[[Path], dict | None],
              force: bool = False, loads: Sequence[Path] = (), roots: Sequence[Path] = (),
              code: Mapping[str, str] | None = None, version: int = 1, reads: Mapping | None = None,
              defaults: Mapping[str, Any] = {}, watch: str = "off", lease: str | None = None) -> bool:
    """Run ``build(scratch)`` unless ``out_dir`` is current; returns whether it ran.  ``loads``: the upstream
    stage folders whose files it opens (:class:`Pruned` if one was pruned); ``watch``: TensorBoard's switch;
    ``lease``: the name it leases the GPU under (:func:`aclm.engine.memory.lease`; default ``name``)."""
    out_dir, inputs = Path(out_dir), [Path(p) for p in inputs]
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        if _planning.get():
            raise Stale(name, f"inputs missing: {missing}")
        raise FileNotFoundError(f"{name}: stage inputs missing: {missing}")
    now = identity(config, inputs, roots, code, version, reads)
    reason = "forced" if force else why_stale(out_dir, now, defaults)
    if reason is None:
        log.info("%s: up to date (%s)", name, out_dir)
        return False
    if _planning.get():
        raise Stale(name, reason)
    for path in loads:
        if pruned_files(path):
            raise Pruned(path)
    log.info("%s: running (%s) -> %s", name, reason, out_dir)
    lease = lease or name
    with memory.lease(lease), atomic_dir(out_dir) as scratch:
        with memory.PeakMemory() as peak:     # ended before the stamp reads it: CUDA's peak is read at its end
            start = time.perf_counter()       # after the lease: waiting for the GPU is not the stage's time
            try:
                with tensorboard.logging_into(scratch / tensorboard.FOLDER, watch):
                    found = build(scratch) or {}
            except Exception as err:
                if _disk_full(err, out_dir.parent):
                    raise NotKept(f"no space left on device: {name} could not write {out_dir} (free some space "
                                  f"there, or point run_dir= elsewhere)") from err
                raise
        check_interrupted()           # a signal a library swallowed while the stage ran: never stamp it
        edited = edited_while_running(now["code"])
        if edited:
            raise NotKept(f"{name}: {', '.join(edited)} changed on disk while this process ran it; the stage's "
                          f"output was made by the code as it was when loaded, which no stamp can name: run again")
        now = _with_downloads(name, now)
        write_json(scratch / STAMP, {
            "stage": name, "fingerprint": config_hash(now),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - start, 3), "memory": {**peak.facts(), **memory.reserved_peak()},
            "threads": cpu_threads(), "inputs": list(now["inputs"]), "config": to_dict(config), "identity": now,
            "reason": reason, "checkout": {**checkout(), "hardware": hardware()}, "lease": lease, "facts": found, "outputs": _listing(scratch),
            "bytes": folder_bytes(scratch)})
    log.info("%s: done in %.1f s", name, time.perf_counter() - start)
    return True


def _disk_full(err: BaseException | None, folder: Path) -> bool:
    """Whether ``err`` (or what caused it) is a full disk; torch says only "iostream error", so a nearly full
    disk counts too."""
    while err is not None:
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        err = err.__cause__ or err.__context__
    try:
        return shutil.disk_usage(folder).free < 16 * 2**20
    except OSError:
        return False


@dataclass(frozen=True)
class Place:
    """Where one stage of one run writes: its folder, the roots its inputs are named from, its lock, the schema's
    defaults, and its GPU lease name (memory may depend on the data: ``s4_generator@zh``; empty: the stage's)."""

    out: Path
    roots: tuple[Path, ...] = ()
    lock: Callable[[], ContextManager] = nullcontext
    defaults: Mapping[str, Any] = field(default_factory=dict)
    lease: str = ""


def _directories(value) -> list:
    """The folders an upstream argument holds: one, a list of them, or a mapping's values."""
    if isinstance(value, Mapping):
        return list(value.values())
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _of(value, cfg) -> tuple:
    return tuple(value(cfg) if callable(value) else value)


@dataclass(frozen=True)
class Stage:
    """A declared stage (see the module).  ``keys`` and ``code`` may be functions of the config (a baseline's
    reads what its method table entry names); ``reads(c)``: what else its output depends on; ``version``: bumped
    by hand for a change the code cannot show (a library upgrade)."""

    name: str
    build: Callable[..., dict | None]
    place: Callable[[Any, str], Place]
    keys: Sequence[str] | Callable = ()
    files: Callable | None = None
    loads: Sequence[str] = ()
    code: Sequence[str] | Callable = ()
    version: int = 1
    reads: Callable | None = None

    def keys_of(self, cfg) -> tuple[str, ...]:
        return _of(self.keys, cfg)

    def fingerprint(self, cfg) -> dict:
        """The config its fingerprint holds under ``cfg``: the view of its keys, where files live aside."""
        return hashed(view(cfg, self.keys_of(cfg)))

    def code_of(self, cfg) -> dict[str, str]:
        return code_digests([self.build.__module__, *_of(self.code, cfg)])

    def __call__(self, cfg, force: bool = False, **upstream) -> Path:
        c, where = view(cfg, self.keys_of(cfg)), self.place(cfg, self.name)
        dirs = [Path(d) for value in upstream.values() for d in _directories(value)]
        with nullcontext() if _planning.get() else where.lock():
            run_stage(self.name, where.out, hashed(c), [*dirs, *(self.files(c) if self.files else [])],
                      partial(self.build, c, **upstream), force=force,
                      loads=[d for d in dirs if d.name in self.loads], roots=where.roots, code=self.code_of(cfg),
                      version=self.version, reads={**model_reads(hashed(c)), **(self.reads(c) if self.reads else {})},
                      defaults=where.defaults, watch=c.tensorboard, lease=where.lease or self.name)
        return where.out


def stage(name: str, *, place: Callable[[Any, str], Place], **declared) -> Callable[[Callable], Stage]:
    """Declare ``build`` as a stage (:class:`Stage`): ``@stage("s2_keywords", place=..., keys=(...))``."""
    return lambda build: Stage(name, build, place, **declared)
