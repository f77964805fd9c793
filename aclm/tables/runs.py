"""One run as every table reads it: where it sits, and what its result.json (or failed.json) says.

A paper table makes its runs from grid cells (:func:`of_cell`: a stale result is missing, a failed prerequisite
is blamed), a table of any runs from the files it finds (:func:`of_file`: a result made by code changed since
is marked); both then read only this record.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

from aclm.base.dicts import flatten
from aclm.base.io import read_json
from aclm.experiments.grid import Cell, GoldSize, failure
from aclm.stages import outputs
from aclm.stages.layout import AUG, GOLD_ONLY, RESULT, S1_EVAL, S6, S7_EVAL
from aclm.engine import STAMP, stamp
from aclm.engine.code import changed_code

OK, FAILED, MISSING = "ok", "failed", "missing"
#: config keys runs of one entry may differ in: the seed, where files live or what ran a run (and ``storage.*``),
#: and the variant (compared as the run's identity)
NOT_COMPARED = ("seed", "data_dir", "run_dir", "device", "variant", "setting_variant")
#: what places a run found on disk, read from its result.json or its failed.json's command
IDENTITY = ("profile", "dataset", "gold", "method", "seed")
#: how many changed modules a warning names
SHOWN_CHANGES = 4

Settings = tuple[tuple[str, str], ...]      # (dotted key, JSON value), sorted


class RunError(ValueError):
    """Runs that make no table: files that say too little to place a run, none found, or two copies of one seed."""


@dataclass(frozen=True)
class Run:
    """A run's place in a table and its outcome: ``status`` ok (``result`` read), failed or missing (``error``)."""

    profile: str
    dataset: str
    gold: GoldSize
    method: str
    seed: int
    result_path: Path
    status: str = MISSING
    result: Optional[dict] = None
    error: Optional[str] = None
    variant: str = ""
    sweep: Optional[str] = None              # the row it fills beside its method's: a sweep point, variant or label
    setting_variant: str = ""
    block: int = 0                           # which of the grid's blocks (columns) it fills
    overrides: Settings = ()                 # a failed run's command key=value words beyond its identity
    label: str = ""                          # the config keys that set its entry apart (tabulate_runs)

    @property
    def aug_path(self) -> Path:
        return self.result_path.parent.parent / S6 / AUG

    @property
    def config(self) -> dict:
        """The config result.json recorded (every stage's keys); empty when none was."""
        config = (self.result or {}).get("config")
        return config if isinstance(config, dict) else {}

    @cached_property                         # read by every grouping step of tabulate_runs: computed once a run
    def settings(self) -> Optional[Settings]:
        """What seeds of one entry share (:func:`compared`, :func:`scored_on`); None where no config was recorded."""
        recorded = isinstance((self.result or {}).get("config"), dict)
        return compared(self.config) + scored_on(self.result) if recorded else None


def method_id(run: Run | Cell) -> str:
    """The method, or ``method@sweep`` for a sweep point or variant (MELM-gold and MELM are ``melm@...``)."""
    return f"{run.method}@{run.sweep}" if run.sweep else run.method


def of_cell(cell: Cell) -> Run:
    """A grid cell's run, blaming a failed prerequisite when it has none itself; a result not current for the
    cell's config is missing, one without a stamp (written by hand) is taken as it is."""
    status, result, error = MISSING, None, None
    if cell.layout.result_path.exists():
        if (cell.layout.result_path.parent / STAMP).exists() and not cell.is_done():
            error = f"{cell.layout.result_path} is stale: its config or inputs changed; re-run the grid"
        else:
            status, result = OK, outputs.result(cell.layout.result_path.parent)
    elif cell.layout.failed_path.exists():
        status, error = FAILED, failure(cell.layout.failed_path)
    else:
        need = next((n for n in cell.prerequisites() if n.layout.failed_path.exists()), None)
        if need:
            what = "S1" if need.method == GOLD_ONLY else need.method
            status, error = FAILED, f"{what} failed: {failure(need.layout.failed_path)}"
    return Run(cell.profile, cell.dataset, cell.gold, cell.method, cell.seed, cell.layout.result_path, status, result,
               error, cell.variant, cell.sweep or "", block=cell.block)


def of_file(path: Path) -> Run:
    """A run from its result.json (warned if made by code changed since) or its failed.json's command (FAILED)."""
    ok = path.name == RESULT
    record = outputs.result(path.parent) if ok else read_json(path)
    fields = record if ok else command_fields(record.get("command", ""))
    missing = [key for key in IDENTITY if key not in fields]
    if missing:
        raise RunError(f"{path}: no {', '.join(missing)} recorded; cannot place the run in a table")
    method_dir = path.parent.parent if path.parent.name == S7_EVAL else None     # none: Gold-only's s1_eval
    setting_dir = (method_dir or path.parent).parent
    outcome = (OK, with_code_warning(path.parent, record), None) if ok else (FAILED, None, failure(path))
    return Run(str(fields["profile"]), str(fields["dataset"]), as_gold(fields["gold"]), str(fields["method"]),
               int(fields["seed"]), path.parent / RESULT, *outcome,
               variant=str(record.get("variant") or (method_dir.name.partition("@")[2] if method_dir else "")),
               setting_variant=str(record.get("setting_variant") or setting_dir.name.partition("@")[2]),
               overrides=() if ok else tuple(sorted((k, v) for k, v in fields.items()
                                                    if k not in IDENTITY and is_compared(k))))


def with_code_warning(scores: Path, result: dict) -> dict:
    """``result``, warned if its chain's code (stamps of its stage and inputs) changed since; no stamp: as it is."""
    if not (scores / STAMP).is_file():
        return result
    own = stamp(scores)
    setting = scores.parent if scores.name == S1_EVAL else scores.parent.parent
    chain = [own, *(stamp(setting / name) for name in own["identity"]["inputs"] if (setting / name / STAMP).is_file())]
    changed = sorted({key for made in chain for key in changed_code(made["identity"].get("code", {}))})
    if not changed:
        return result
    named = ", ".join(changed[:SHOWN_CHANGES]) + (f" and {len(changed) - SHOWN_CHANGES} more"
                                                  if len(changed) > SHOWN_CHANGES else "")
    return {**result, "warnings": [*(result.get("warnings") or []),
                                   f"made by code that has changed since it ran: {named}"]}


def tested_sizes(result: dict) -> dict[str, int]:
    """The sentences of each test set a result was scored on, by name (``sizes["test:<name>"]``)."""
    return {key.partition(":")[2]: n for key, n in (result.get("sizes") or {}).items() if key.startswith("test:")}


def scored_on(result: dict) -> Settings:
    """What a run was scored on and cut from, as its result.json recorded it: each test set's size and content,
    and the gold data's content.  Runs that differ in them are never seeds of one entry."""
    data = result.get("data") or {}
    found = [(f"test set {name}", json.dumps(f"{size} sentences" + (f", {data['test'][name][:8]}"
                                                                    if name in data.get("test", {}) else "")))
             for name, size in tested_sizes(result).items()]
    if data.get("gold"):
        found.append(("gold data", json.dumps(hashlib.sha256(repr(sorted(data["gold"].items())).encode())
                                               .hexdigest()[:8])))
    return tuple(sorted(found))


def command_fields(command: str) -> dict:
    """The ``key=value`` arguments of a recorded command line."""
    return dict(word.split("=", 1) for word in shlex.split(command) if "=" in word and not word.startswith("-"))


def as_gold(value) -> GoldSize:
    """A gold size as the run tree spells it: a number, or a word such as ``full``."""
    return int(value) if str(value).isdigit() else str(value)


def is_compared(key: str) -> bool:
    return key not in NOT_COMPARED and key.split(".")[0] != "storage"


def compared(config: dict) -> Settings:
    """What of a recorded config must be equal for two runs to be seeds of one entry: all but :data:`NOT_COMPARED`."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in flatten(config).items() if is_compared(k)))


def shown(value: Optional[str]) -> str:
    """A compared value (JSON) as a label writes it."""
    if value is None:
        return "(unset)"
    plain = json.loads(value)
    return plain if isinstance(plain, str) else json.dumps(plain)


def differing(configs: list[dict[str, str]]) -> list[str]:
    """The keys whose values (JSON; missing: unset) are not the same in all of ``configs``."""
    return [k for k in sorted({k for c in configs for k in c}) if len({c.get(k) for c in configs}) > 1]
