"""Seeds, devices, logging, signals and the facts every run JSON records.

torch is imported where a function needs it: the scripts' ``--help`` and a
chain's planning load this module without a training library.
"""

from __future__ import annotations

import logging
import platform
import random
import signal
import threading
import time
import warnings
from contextlib import contextmanager
from importlib import metadata
from typing import Iterator

import psutil

log = logging.getLogger("aclm")

_LIBRARIES = ("torch", "transformers", "flair", "sentence-transformers", "seqeval",
              "scikit-multilearn", "datasets", "numpy")


#: Library warnings about the libraries' own internals: nothing a user of this project can act on.
_LIBRARY_NOISE = (
    dict(category=FutureWarning),
    dict(category=DeprecationWarning),
    dict(message=".*'pin_memory' argument is set as true but no accelerator is found.*"),
    dict(message="mtime may not be reliable on this filesystem"),    # the Trainer, at every checkpoint it rotates
)


@contextmanager
def logging_to(path) -> Iterator[None]:
    """Inside the block, every log line also goes to the file ``path`` (appended, with the time and date)."""
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def setup_logging(level: int = logging.INFO) -> None:
    """Our log lines with a time stamp; libraries' warnings and notices only when they are errors."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    for noise in _LIBRARY_NOISE:
        warnings.filterwarnings("ignore", **noise)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


class RunError(RuntimeError):
    """A run failed for a reason its user can act on (a tagger that learned nothing, a folder in use):
    the scripts print it as one line, not a traceback."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the run stops, exit status 128 + the signal's number (130, 143).

    A ``BaseException`` that is not a ``KeyboardInterrupt``: flair's trainer
    catches ``KeyboardInterrupt`` and carries on as if training had ended, and
    ``except Exception`` in any library lets this one pass.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_received: list[int] = []


def _on_signal(signum: int, frame) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def handle_signals() -> None:
    """Record SIGINT and SIGTERM and raise :class:`Interrupted` where the program is.

    Raised, it unwinds every ``finally`` (a stage's scratch folder is removed);
    recorded, it cannot be lost: an exception raised inside a library's
    ``__del__`` or teardown is printed and dropped by Python ("Exception ignored
    in ..."), so :func:`check_interrupted` raises it again at the next safe point
    (before a stage is stamped, between stages, at exit).
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def check_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal arrived, even one whose exception a library swallowed."""
    if _received:
        raise Interrupted(_received[0])


def forget_signals() -> None:
    """Clear what :func:`handle_signals` recorded (a process that handles one run after another: tests)."""
    _received.clear()


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def select_device(name: str = "auto"):
    """Resolve ``auto`` to a ``torch.device`` and, on a GPU, allow TF32 matmuls (no effect on our results'
    precision needs)."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    import flair

    flair.device = device
    return device


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


class Timings(dict):
    """Seconds per named step, filled by ``with timings.step("name"):``."""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        log.info("%s: started", name)
        try:
            yield
        finally:
            self[name] = round(time.perf_counter() - start, 3)
            log.info("%s: %.1f s", name, self[name])


class PeakMemory:
    """The peak resident memory of this process (sampled) and CUDA's peak allocation, over a ``with`` block.

    RSS is sampled every ``interval`` seconds by a thread (a stage's peak between
    two samples can be missed); the CUDA figure is exact.
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.rss_mb = 0.0
        self.cuda_mb: float | None = None
        self._stop = threading.Event()

    def _sample(self) -> None:
        process = psutil.Process()
        while True:
            self.rss_mb = max(self.rss_mb, process.memory_info().rss / 2**20)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> "PeakMemory":
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.cuda_mb = torch.cuda.max_memory_allocated() / 2**20

    def facts(self) -> dict:
        return {"peak_rss_mb": round(self.rss_mb, 1),
                **({"cuda_peak_mb": round(self.cuda_mb, 1)} if self.cuda_mb is not None else {})}
