"""How long the rest of a run may take, said after each stage, by ``--dry-run`` and by the demo.

A stage still to run is counted, first found first: for S7, this run's S1 scaled by S7's training sentences
(other runs' S7 trained on other numbers); the median of this profile's earlier runs under the run folder; a
stage that did the same work (S7's scoring from S1's); the profile's measured run on 2 idle cores
(:data:`MEASURED`), which a first run on a new machine has.  A span tagger's stages are known only from span
tagger runs.  A stage with none of these is named as not yet known, never counted as no time.  Recording a
measured run: ``python -m aclm.run.estimates --help``.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median_high
from typing import Mapping

from omegaconf import DictConfig, OmegaConf

from aclm.base import registry
from aclm.base.io import read_json, write_json
from aclm.base.paths import CONFIG_DIR
from aclm.engine.stages import STAMP, stamp
from aclm.stages import layout

#: a stage and the earlier stage of the same run that does the same work
SIBLINGS = {layout.S7: layout.S1, layout.S7_EVAL: layout.S1_EVAL}
#: the stages a span tagger (GLiNER) runs in place of flair's: estimated only from span tagger runs (``gliner``)
SPAN_STAGES = (layout.S7, layout.S7_EVAL)
#: per profile, runs measured on 2 idle cores: the keys they set beyond the profile, each stage's seconds
MEASURED = CONFIG_DIR / "stage_seconds.json"


def recorded_seconds(cfg: DictConfig, name: str) -> float | None:
    """The median seconds stage ``name`` took in this profile's runs under ``run_dir`` (None: none recorded)."""
    span = registry.get(cfg.method).tagger != "flair"
    stamps = [s for s in (stamp(path.parent) for path in (Path(cfg.run_dir) / cfg.profile).glob(f"**/{name}/{STAMP}"))
              if name not in SPAN_STAGES or ("gliner" in s.get("config", {})) == span]
    if name != layout.S7:
        return median_high([s["seconds"] for s in stamps]) if stamps else None
    rates = len(cfg.tuning.learning_rates)          # a tuned S7 trains one tagger per rate: counted a tagger at a time
    alike = [s for s in stamps if bool(tuning_rates(s["config"])) == bool(rates)]
    if not alike and not span and registry.get(cfg.method).generation == "none":   # the gold alone: S1's work
        s1 = recorded_seconds(cfg, layout.S1)
        return s1 * max(1, rates) if s1 is not None else None
    times = [s["seconds"] / max(1, len(tuning_rates(s["config"]))) for s in alike or stamps]
    return median_high(times) * max(1, rates) if times else None


def tuning_rates(config: Mapping) -> list:
    """The learning rates a stage's recorded config tuned S7 over (none: not tuned)."""
    return list((config.get("tuning") or {}).get("learning_rates") or [])


def measured_run(cfg: DictConfig) -> dict | None:
    """The measured run of ``cfg``'s profile whose keys ``cfg`` has (a recipe's own before the profile's)."""
    runs = read_json(MEASURED).get(cfg.profile, []) if MEASURED.exists() else []
    fitting = [r for r in runs if all(OmegaConf.select(cfg, k) == v for k, v in r["keys"].items())]
    return max(fitting, key=lambda r: len(r["keys"]), default=None)


def sibling_seconds(cfg: DictConfig, name: str, done: Mapping[str, Path]) -> float | None:
    """``name``'s time guessed from its sibling's in this run (None: none yet); a tuned S7 trains one per rate."""
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
    return (seen["seconds"] + training * added / max(gold, 1)) * max(1, len(cfg.tuning.learning_rates))


def duration(seconds: float) -> str:
    """``seconds`` as a person reads them: seconds below a minute and a half (never 0), minutes above."""
    return "under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def guesses(cfg: DictConfig, recorded: Mapping[str, float | None], done: Mapping[str, Path] | None = None
            ) -> dict[str, float | None]:
    """Each stage of ``recorded`` (its :func:`recorded_seconds`) counted from what is known of it (None: nothing)."""
    measured = (measured_run(cfg) or {}).get("seconds", {})
    flair = registry.get(cfg.method).tagger == "flair"      # the measured runs and S1 train flair taggers
    out = {}
    for name, seconds in recorded.items():
        if flair or name not in SPAN_STAGES:
            sibling = sibling_seconds(cfg, name, done or {})
            if seconds is None or (name == layout.S7 and sibling is not None):   # S7: this run's own size first
                seconds = sibling
            if seconds is None and name == layout.S7_EVAL:  # the same test sets as S1's scoring in this profile's runs
                seconds = recorded_seconds(cfg, layout.S1_EVAL)
            seconds = measured.get(name) if seconds is None else seconds
        out[name] = seconds
    return out


def rest(guessed: Mapping[str, float | None]) -> str:
    """What the stages still to run may take (``guessed``: :func:`guesses`), and which of them it leaves out."""
    known = {name: seconds for name, seconds in guessed.items() if seconds is not None}
    unknown = [name for name in guessed if name not in known]
    seconds = sum(known.values())
    total = duration(seconds)
    if not unknown:
        about = "up to about " if seconds >= 1 else ""
        return f"the rest takes {about}{total} (as in this profile's runs, this one's or its measured run)"
    missing = f"{', '.join(unknown)}: neither run nor measured in this profile"
    if not known:
        return f"no estimate yet for the rest ({missing})"
    return f"the rest takes {total} for {', '.join(known)}, more for the others ({missing})"


def record(folder: Path, profile: str, keys: Mapping[str, object], command: str) -> dict:
    """Write the finished run under ``folder`` (its setting folder, method folders inside) as ``profile``'s
    measured run with ``keys`` (what it set beyond the profile), in place of one with the same keys."""
    stamps = sorted((stamp(path.parent) for path in Path(folder).glob(f"**/{STAMP}")), key=lambda s: s["finished"])
    commits = {(s["checkout"]["commit"], s["checkout"]["dirty"]) for s in stamps}
    if not stamps or len(commits) != 1:
        raise ValueError(f"{folder}: expected the stages of one run at one commit, found {len(stamps)} stages "
                         f"at {sorted(commits)}")
    commit, dirty = commits.pop()
    entry = {"keys": dict(keys), "seconds": {s["stage"]: s["seconds"] for s in stamps},
             "threads": sorted({s["threads"] for s in stamps}), "command": command,
             "commit": commit[:7] + (" (uncommitted edits)" if dirty else "")}
    table = read_json(MEASURED) if MEASURED.exists() else {}
    table[profile] = [*(r for r in table.get(profile, []) if r["keys"] != entry["keys"]), entry]
    write_json(MEASURED, table)
    return entry


if __name__ == "__main__":
    import argparse

    import yaml

    parser = argparse.ArgumentParser(description="Record a finished run as its profile's measured run.")
    parser.add_argument("folder", type=Path, help="the run's setting folder (RUN_DIR/PROFILE/DATASET/goldN/seedS)")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--command", required=True, help="the command that made the run, as a person would rerun it")
    parser.add_argument("keys", nargs="*", metavar="KEY=VALUE", help="what the run set beyond the profile")
    args = parser.parse_intermixed_args()
    keys = {k: yaml.safe_load(v) for k, v in (pair.split("=", 1) for pair in args.keys)}   # ner.epochs=20: 20
    print(record(args.folder, args.profile, keys, args.command))
