"""What a stage holds in memory, measured, and one GPU's memory shared by the runs packed on it.

:class:`PeakMemory` records a stage's peaks.  Under ``JOBS=auto`` the grid writes a ledger (:func:`create`, needs
from :mod:`aclm.experiments.packing`) that runs find through :data:`LEDGER_ENV`; each stage holds its need while it
runs (:func:`lease`), and between stages a process counts at its CUDA context.  A need that does not fit waits,
first come first served, so a large stage is not passed over forever; one larger than the card runs alone.  The
ledger is one JSON file changed under ``flock``; a dead process's lease is dropped by the next reader.
"""

from __future__ import annotations

import fcntl
import gc
import json
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

import psutil

from aclm.base.io import read_json, write_json

log = logging.getLogger("aclm.engine.memory")

LEDGER_ENV = "ACLM_GPU_LEDGER"
CONTEXT_MB = 600                 # a CUDA context and what the allocator keeps after empty_cache (one H100)
POLL_S = 2.0


def create(path: Path, capacity_mb: float, needs_mb: Mapping[str, int]) -> None:
    """A fresh ledger: ``capacity_mb`` to share, and the stages' needs (MB); no lease held."""
    write_json(Path(path), {"capacity_mb": round(capacity_mb), "needs_mb": dict(needs_mb), "held": {},
                            "queue": []})


@contextmanager
def _locked(path: str) -> Iterator[dict]:
    """The ledger's state under an exclusive lock (on a file beside it), written back whole and atomically:
    a process killed while writing leaves the previous state, never half of one."""
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.loads(Path(path).read_text())
        yield state
        write_json(Path(path), state)


def _take(state: dict, pid: str, stage: str, need: int) -> bool:
    """Queue ``pid``; give it the lease if it is first in the queue and its need fits (or no other stage
    holds a lease, for a need larger than the card)."""
    state["held"] = {p: h for p, h in state["held"].items() if psutil.pid_exists(int(p))}
    state["queue"] = [p for p in state["queue"] if psutil.pid_exists(int(p))]
    if pid not in state["queue"]:
        state["queue"].append(pid)
    others = {p: h for p, h in state["held"].items() if p != pid}
    fits = sum(h["mb"] for h in others.values()) + need <= state["capacity_mb"]
    alone = not any(h["stage"] for h in others.values())
    if state["queue"][0] != pid or not (fits or alone):
        return False
    state["queue"].remove(pid)
    state["held"][pid] = {"stage": stage, "mb": need}
    return True


def _release_cuda_cache() -> None:
    """Give back what the stage's tensors held: without it the allocator keeps the memory from the others."""
    torch = sys.modules.get("torch")
    gc.collect()
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def reserved_peak() -> dict:
    """The most this process's CUDA allocator reserved since the peaks were last reset (a stage's start): what
    it held on the card beyond its context, which can be far above its tensors' peak (S4's, docs/cost.md)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {"cuda_reserved_mb": round(torch.cuda.max_memory_reserved() / 2**20, 1)}


@contextmanager
def lease(stage: str) -> Iterator[None]:
    """Hold ``stage``'s share of the GPU while the block runs, waiting for it first (see the module).  A
    ``stage@language`` name takes that language's need where the ledger has one, else the stage's."""
    path = os.environ.get(LEDGER_ENV)
    if not path or not Path(path).exists():
        yield
        return
    needs = read_json(path)["needs_mb"]                  # fixed when the ledger was written: no lock needed
    need = needs.get(stage, needs.get(stage.split("@")[0], 0))
    if not need:
        yield
        return
    pid, start, said = str(os.getpid()), time.monotonic(), False
    try:
        while True:
            with _locked(path) as state:
                if _take(state, pid, stage, need):
                    break
                held = sum(h["mb"] for h in state["held"].values())
                capacity, waiting = state["capacity_mb"], len(state["queue"]) - 1
            if not said:
                log.info("%s: waiting for %d MB of the GPU (%d of %d MB leased, %d other stage(s) queued)",
                         stage, need, held, capacity, waiting)
                said = True
            time.sleep(POLL_S)
    except BaseException:
        with _locked(path) as state:
            state["queue"] = [p for p in state["queue"] if p != pid]
        raise
    if said:
        log.info("%s: got %d MB of the GPU after %.0f s", stage, need, time.monotonic() - start)
    try:
        yield
    finally:
        _release_cuda_cache()
        with _locked(path) as state:
            state["held"][pid] = {"stage": None, "mb": CONTEXT_MB}


class PeakMemory:
    """The peak resident memory of this process (sampled every ``interval`` s, so a peak between two samples
    can be missed) and CUDA's exact peak allocation, over a ``with`` block."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.rss_mb, self.cuda_mb = interval, 0.0, None
        self._stop = threading.Event()

    def _sample_now(self) -> None:
        self.rss_mb = max(self.rss_mb, psutil.Process().memory_info().rss / 2**20)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample_now()

    def __enter__(self) -> "PeakMemory":
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self._sample_now()            # a block shorter than one interval still has its samples: here and at exit
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample_now()
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.cuda_mb = torch.cuda.max_memory_allocated() / 2**20

    def facts(self) -> dict:
        """The peaks, once the block has ended (CUDA's is read at its end)."""
        return {"peak_rss_mb": round(self.rss_mb, 1),
                **({"cuda_peak_mb": round(self.cuda_mb, 1)} if self.cuda_mb is not None else {})}
