"""Seeds, devices, the user-facing error, step timings and recorded library versions.

torch is imported lazily: ``--help`` and chain planning load this module without a training library.
"""

from __future__ import annotations

import logging
import platform
import random
import sys
import time
from contextlib import contextmanager
from importlib import metadata
from typing import Iterator

from aclm.base import signals

log = logging.getLogger("aclm")
#: Where tools/pretraining.py imports it from: the mini generators' fingerprints hold that import line.
Interrupted = signals.Interrupted

_LIBRARIES = ("torch", "transformers", "flair", "sentence-transformers", "seqeval",
              "scikit-multilearn", "datasets", "numpy")


def cpu_threads() -> int | None:
    """torch's CPU intra-op threads (None: torch not loaded); recorded by a stage, since sums split by
    this count and their last bits can differ with it."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


class RunError(RuntimeError):
    """A failure the user can act on: the scripts print it as one line, not a traceback."""


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def select_device(name: str = "auto"):
    """Resolve ``auto`` to a ``torch.device``; on a GPU allow TF32 (precise enough for our results)."""
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
