"""How long the rest of a run may take, said after each stage and by ``--dry-run``.

A stage still to run is counted from what is known of it, in this order: the median time it took in this
profile's earlier runs; else a stage of this run that did the same work (S7's tagger from S1's, its training
time scaled by S7's training sentences, and S7's scoring from S1's, on the same test sets).  A stage with
neither is named as not yet known, never counted as no time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from omegaconf import DictConfig

from aclm.engine.stages import STAMP, stamp
from aclm.stages import layout

#: a stage and the earlier stage of the same run that does the same work
SIBLINGS = {layout.S7: layout.S1, layout.S7_EVAL: layout.S1_EVAL}


def recorded_seconds(cfg: DictConfig, name: str) -> float | None:
    """The median time the stage ``name`` took in the runs of this profile under ``run_dir`` (None: none
    recorded): a rough guess of what it will take here."""
    times = sorted(stamp(path.parent)["seconds"]
                   for path in (Path(cfg.run_dir) / cfg.profile).glob(f"**/{name}/{STAMP}"))
    return times[len(times) // 2] if times else None


def sibling_seconds(name: str, done: Mapping[str, Path]) -> float | None:
    """``name``'s time guessed from its sibling's in this run (None: no sibling, or not run yet)."""
    sibling = SIBLINGS.get(name)
    if sibling not in done:
        return None
    seen = stamp(done[sibling])
    if name != layout.S7:
        return seen["seconds"]
    if layout.S6 not in done:
        return None
    gold, added = seen["facts"]["train"], stamp(done[layout.S6])["facts"]["added"]
    training = seen["facts"]["training"]["seconds"]["train"]
    return seen["seconds"] + training * added / max(gold, 1)


def duration(seconds: float) -> str:
    """``seconds`` as a person reads them: seconds below a minute and a half (never 0), minutes above."""
    return "under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def rest(names: Iterable[str], recorded: Mapping[str, float | None], done: Mapping[str, Path]) -> str:
    """What the stages ``names`` still to run may take, and which of them that guess leaves out."""
    known: dict[str, float] = {}
    unknown: list[str] = []
    for name in names:
        guess = recorded.get(name)
        guess = sibling_seconds(name, done) if guess is None else guess
        if guess is None:
            unknown.append(name)
        else:
            known[name] = guess
    seconds = sum(known.values())
    total = duration(seconds)
    if not unknown:
        about = "up to about " if seconds >= 1 else ""
        return f"the rest takes {about}{total} (as in this profile's runs and this one's)"
    missing = f"{', '.join(unknown)}: not run before in this profile"
    if not known:
        return f"no estimate yet for the rest ({missing})"
    return f"the rest takes {total} for {', '.join(known)}, more for the others ({missing})"
