"""TensorBoard event files for every model a stage trains (``tensorboard=auto|on|off``).

In no fingerprint: they show how training went, not what it made (docs/reproducing.md, "TensorBoard").
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator, Optional

from aclm.base.runtime import RunError

#: The folder a stage's event files go under, inside its output.
FOLDER = "tensorboard"
_root: ContextVar[Optional[Path]] = ContextVar("tensorboard_root", default=None)


def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def enabled(mode: str) -> bool:
    """Whether ``mode`` logs; ``on`` without the package fails before any training."""
    if mode == "on" and not installed():
        raise RunError("tensorboard=on, but the tensorboard package is not installed "
                       "(pip install tensorboard, or tensorboard=off)")
    return mode == "on" or (mode == "auto" and installed())


@contextmanager
def logging_into(root: Path, mode: str) -> Iterator[None]:
    """Inside the block, :func:`folder` names subfolders of ``root`` (when ``mode`` logs)."""
    token = _root.set(Path(root) if enabled(mode) else None)
    try:
        yield
    finally:
        _root.reset(token)


def folder(name: str) -> Optional[Path]:
    """Where the model ``name`` of the stage being built writes its events (created), or None."""
    root = _root.get()
    if root is None:
        return None
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def writer(name: str):
    """torch's ``SummaryWriter`` into :func:`folder` (``name``), or None when not logging."""
    path = folder(name)
    if path is None:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(path))


def trainer_callbacks(name: str) -> list:
    """The HF Trainer's callbacks that log ``name``'s losses and learning rate (none when not logging)."""
    summary = writer(name)
    if summary is None:
        return []
    from transformers.integrations import TensorBoardCallback

    return [TensorBoardCallback(tb_writer=summary)]
