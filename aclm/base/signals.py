"""SIGINT and SIGTERM stop a run where it is, even if a library swallows them (in no stage's code identity)."""

from __future__ import annotations

import signal

class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: exit status 128 + signal number.  Not a ``KeyboardInterrupt``, which
    flair's trainer catches and carries on; ``except Exception`` lets it pass."""

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
    """Record SIGINT/SIGTERM and raise :class:`Interrupted`; recorded because Python drops exceptions raised
    in a ``__del__`` or teardown, so :func:`check_interrupted` re-raises at the next safe point."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def check_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal arrived, even one whose exception a library swallowed."""
    if _received:
        raise Interrupted(_received[0])


def forget_signals() -> None:
    """Clear recorded signals (tests run one run after another in a process)."""
    _received.clear()
