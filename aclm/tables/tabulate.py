"""Tables of any finished runs, laid out and computed as the paper grids' tables are (:mod:`aclm.tables.report`).

A grid's table holds the runs its YAML asks for; these tables hold the runs
found under the folders, files or globs given (``scripts/tabulate.py``,
``make table``): German at 300 gold, a dataset folder's runs under
``runs/<profile>/local/...``, a slice of a grid.  A run is a ``result.json``
in an ``s1_eval`` or ``s7_eval`` folder, or the ``failed.json`` left beside a
missing one (FAILED, with its error).  What a run is (profile, dataset, gold
size, method, seed) is read from that file (a failed run's from the command
it recorded), its variant from its method folder (``<method>@<variant>``).
A result is taken as it is: unlike a grid's cell, a run found on disk has no
config to hold it to, so a result whose stages went stale is not told apart.

Two tables, with the grids' statistics (mean ± std over seeds, ``[n=k]`` when
only k of an entry's runs have a value, FAILED, Welch's t-test of ACLM
against the best of the paper's baselines present in each column):

* ``f1``: a row per method (and variant), a column per dataset x gold size
  (span micro F1 on the dataset's test set), and one per further test set
  the runs of that dataset and size scored on (cross-lingual, or a union's
  members);
* ``per_type``: F1 per entity type, the rows grouped by dataset and gold size.

Given a paper grid (``--paper table1``), an entry shows the paper's number
where a cell of that grid is the same run (dataset, gold size, method and
variant, under the run's profile) and has a column of the same value of
result.json.  A grid whose numbers are averages over datasets (Tables 10, 11)
matches no single run.
"""

from __future__ import annotations

import glob
import math
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from aclm.base.io import read_json
from aclm.base.registry import METHODS
from aclm.base.paths import PROJECT_ROOT
from aclm.run import outputs
from aclm.run.layout import AUG, FAILED, GOLD_ONLY, RESULT, S1_EVAL, S6, S7_EVAL
from aclm.tables.grid import Block, Gold, Grid, expand, failure, load_grid
from aclm.tables.report import FAILED as FAILED_STATUS
from aclm.tables.report import OK, Report, assemble, method_id, read_reference, template_fields, test_sets

#: Welch's t-test: ACLM against the best baseline, as in the paper's tables (variants of a baseline count):
#: every method of the method table that is not ACLM's own.
COMPARED = "aclm"
BASELINES = tuple(m.name for m in METHODS.values() if m.generation != "aclm")
IDENTITY = ("profile", "dataset", "gold", "method", "seed")


class TabulateError(ValueError):
    pass


@dataclass(frozen=True)
class FoundRun:
    """One run found on disk: what :mod:`aclm.tables.report` reads of a run (:class:`aclm.tables.report.Run`)."""

    profile: str
    dataset: str
    gold: Gold
    method: str
    seed: int
    variant: str
    result_path: Path
    block: int = 0

    @property
    def sweep(self) -> Optional[str]:
        return self.variant or None

    @property
    def failed_path(self) -> Path:
        return self.result_path.parent / FAILED

    @property
    def aug_path(self) -> Path:
        return self.result_path.parent.parent / S6 / AUG


# --- finding runs --------------------------------------------------------------------------

def matching_files(pattern: str) -> list[Path]:
    """The files a path or glob names, a folder searched through; a glob for result.json also finds the
    failed.json of a run that has none."""
    if not glob.has_magic(pattern):
        if not Path(pattern).exists():
            raise TabulateError(f"{pattern}: no such file or folder")
        found = [Path(pattern)]
    else:
        patterns = [pattern] + ([pattern[: -len(RESULT)] + FAILED] if pattern.endswith(RESULT) else [])
        found = [Path(p) for each in patterns for p in glob.glob(each, recursive=True)]
    files = []
    for path in found:
        files += [*path.rglob(RESULT), *path.rglob(FAILED)] if path.is_dir() else [path]
    return files


def find_runs(patterns: Sequence[str]) -> list[FoundRun]:
    """The runs under ``patterns``, once each, in table order; a failed.json beside a result is stale and left out."""
    files: dict[Path, Path] = {}
    for pattern in patterns:
        for path in matching_files(pattern):
            if path.parent.name not in (S1_EVAL, S7_EVAL) or path.name not in (RESULT, FAILED):
                continue
            if path.name == RESULT or not (path.parent / RESULT).exists():
                files.setdefault(path.parent.resolve(), path)
    if not files:
        raise TabulateError(f"no result.json or failed.json of a run under {' '.join(patterns)}")
    return sorted((identify(path) for path in files.values()), key=run_order)


def identify(path: Path) -> FoundRun:
    """A run's identity from its result.json, or from the command its failed.json recorded."""
    record = outputs.result(path.parent) if path.name == RESULT else read_json(path)
    fields = record if path.name == RESULT else command_fields(record.get("command", ""))
    missing = [key for key in IDENTITY if key not in fields]
    if missing:
        raise TabulateError(f"{path}: no {', '.join(missing)} recorded; cannot place the run in a table")
    method_dir = path.parent.parent.name if path.parent.name == S7_EVAL else GOLD_ONLY
    return FoundRun(str(fields["profile"]), str(fields["dataset"]), as_gold(fields["gold"]), str(fields["method"]),
                    int(fields["seed"]), method_dir.partition("@")[2], path.parent / RESULT)


def command_fields(command: str) -> dict:
    """The ``key=value`` arguments of a recorded command line."""
    return dict(word.split("=", 1) for word in shlex.split(command) if "=" in word and not word.startswith("-"))


def as_gold(value) -> Gold:
    """A gold size as the run tree spells it: a number, or a word such as ``full``."""
    return int(value) if str(value).isdigit() else str(value)


def gold_order(gold: Gold) -> tuple:
    return (0, gold, "") if isinstance(gold, int) else (1, 0, gold)


def run_order(run: FoundRun) -> tuple:
    """Methods in the method table's order (others after), then variant, dataset, gold size (growing) and seed."""
    rank = list(METHODS).index(run.method) if run.method in METHODS else len(METHODS)
    return rank, run.method, run.variant, run.dataset, gold_order(run.gold), run.seed


def found_status(run: FoundRun) -> tuple[str, Optional[dict], Optional[str]]:
    """(status, result, error): a run found has its result, or else its failed.json."""
    if run.result_path.exists():
        return OK, outputs.result(run.result_path.parent), None
    return FAILED_STATUS, None, failure(run.failed_path)


# --- the tables' grids ---------------------------------------------------------------------

def literal(text: str) -> str:
    """``text`` as a column template that formats to itself (a dataset folder's name may hold braces)."""
    return text.replace("{", "{{").replace("}", "}}")


def f1_columns(dataset: str, gold: Gold, results: list[dict]) -> dict[str, str]:
    """The F1 table's columns of one dataset and gold size: its own test set, then every other one scored."""
    base = f"{dataset} gold{gold}"
    others = dict.fromkeys(name for result in results for name in result.get("test", {}) if name != dataset)
    return {literal(base): "f1", **{literal(f"{base} → {name}"): f"test.{name}.f1" for name in others}}


def type_columns(dataset: str, gold: Gold, results: list[dict]) -> dict[str, str]:
    """The per-type table's columns of one dataset and gold size: every entity type its runs were scored on."""
    types = dict.fromkeys(t for result in results for t in result.get("per_type", {}))
    return {literal(t): f"per_type.{t}.f1" for t in types}


TABLES = {
    "f1": ("Span micro F1 of the runs found", {"method": "{method_name}"}, f1_columns),
    "per_type": ("F1 per entity type of the runs found",
                 {"dataset": "{dataset}", "gold": "{gold}", "method": "{method_name}"}, type_columns),
}


def method_names(runs: Sequence[FoundRun], paper: Optional[Grid]) -> dict[str, str]:
    """A row name for every method and variant present: the paper grid's name for a method, else ours."""
    names = {**{m.name: m.title for m in METHODS.values()},
             **({k: v for k, v in paper.method_names.items() if "@" not in k} if paper else {})}
    out = {}
    for run in runs:
        name = names.get(run.method, run.method)
        out[method_id(run)] = f"{name} @{run.variant}" if run.variant else name
    return out


def comparison(runs: Sequence[FoundRun]) -> dict:
    """ACLM against the baselines present (their variants too); nothing to compare without ACLM."""
    if not any(run.method == COMPARED and not run.variant for run in runs):
        return {}
    ids = dict.fromkeys(method_id(run) for run in runs if run.method in BASELINES)
    return {"method": COMPARED, "baselines": list(ids)}


def table_grid(name: str, runs: Sequence[FoundRun], paper: Optional[Grid]) -> tuple[Grid, list[FoundRun], list[str]]:
    """The grid of one table over ``runs`` (a block per dataset and gold size), the runs placed in their
    blocks, and the columns in order."""
    title, index, columns_of = TABLES[name]
    settings = sorted({(r.dataset, r.gold) for r in runs}, key=lambda s: (s[0], gold_order(s[1])))
    blocks, placed, order = [], [], []
    for i, (dataset, gold) in enumerate(settings):
        mine = [replace(r, block=i) for r in runs if (r.dataset, r.gold) == (dataset, gold)]
        results = [outputs.result(r.result_path.parent) for r in mine if r.result_path.exists()]
        columns = columns_of(dataset, gold, results)
        blocks.append(Block((dataset,), (gold,), tuple(dict.fromkeys(r.method for r in mine)), columns))
        placed += mine
        order += [c.format() for c in columns if c.format() not in order]
    grid = Grid(name=name, title=f"{title}, beside {paper.title}" if paper else title,
                reference=dict(paper.reference) if paper else {}, seeds=(), method_names=method_names(runs, paper),
                index=dict(index), blocks=tuple(blocks), compare=comparison(runs))
    return grid, sorted(placed, key=run_order), order


# --- the paper's numbers beside --------------------------------------------------------------

def paper_numbers(paper: Grid, grid: Grid, runs: Sequence[FoundRun], root: Path = PROJECT_ROOT) -> pd.DataFrame:
    """The paper's number for each of our entries that a cell of ``paper`` matches (the same run, a column of
    the same value), in long form: ``grid``'s index columns, column, paper."""
    columns = [*grid.index, "column", "paper"]
    if paper.average_datasets:
        return pd.DataFrame(columns=columns).astype({"paper": float})
    reference, _ = read_reference(paper, root)
    numbers = {tuple(row[[*paper.index, "column"]]): row["paper"] for _, row in reference.iterrows()}
    cells = {}
    for profile in sorted({run.profile for run in runs}):
        for cell in expand(paper, profile):
            cells.setdefault((profile, cell.dataset, str(cell.gold), cell.method, cell.variant), cell)
    rows = []
    for run in runs:
        cell = cells.get((run.profile, run.dataset, str(run.gold), run.method, run.variant))
        if cell is None:
            continue
        theirs, ours = template_fields(paper, cell), template_fields(grid, run)
        index = {key: template.format(**ours) for key, template in grid.index.items()}
        our_column = {path: column.format(**ours) for column, path in grid.blocks[run.block].columns.items()}
        key = tuple(template.format(**theirs) for template in paper.index.values())
        for column, path in paper.blocks[cell.block].columns.items():
            if path in our_column:
                rows.append({**index, "column": our_column[path],
                             "paper": numbers.get((*key, column.format(**theirs)), math.nan)})
    return pd.DataFrame(rows, columns=columns).astype({"paper": float}).drop_duplicates([*grid.index, "column"])


# --- the tables ------------------------------------------------------------------------------

def tabulate(patterns: Sequence[str], paper_name: Optional[str] = None,
             root: Path = PROJECT_ROOT) -> list[tuple[Grid, Report]]:
    """The F1 table and the per-type table (when a run has per-type scores) of the runs under ``patterns``."""
    runs = find_runs(patterns)
    paper = load_grid(paper_name) if paper_name else None
    profile = ", ".join(sorted({run.profile for run in runs}))
    tested = test_sets(paper.reference.get("test_set") if paper else None, runs)
    reports = []
    for name in TABLES:
        grid, placed, order = table_grid(name, runs, paper)
        if not order:
            continue
        reference = paper_numbers(paper, grid, placed, root) if paper else None
        reports.append((grid, assemble(grid, placed, profile, reference, order, tested, found_status)))
    return reports

