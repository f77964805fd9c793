"""Log lines to the terminal and a run's log file, libraries' noise silenced (in no stage's code identity)."""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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
