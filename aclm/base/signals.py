"""SIGINT and SIGTERM stop a run where it is, and a library that swallows one cannot lose it.

Nothing here changes what a stage computes: no stage's code identity holds it (:mod:`aclm.engine.code`).
"""

from __future__ import annotations

import signal

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
