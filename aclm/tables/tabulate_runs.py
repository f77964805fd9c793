"""Tables of any finished runs, laid out and computed as the grids' tables are (:mod:`aclm.tables.aggregate`).

A run is a ``result.json`` in an ``s1_eval`` or ``s7_eval`` folder under the paths or globs given, or the
``failed.json`` beside a missing one.  Runs are seeds of one entry only when all else is equal: profile, method and
variant, setting, the recorded config less seed and where files live (:func:`aclm.tables.runs.compared`), and what
they were scored on and cut from; entries of one method and setting are labelled with the keys that differ.  A
failed run (no config recorded) joins the one config its command's ``key=value`` words agree with.  Two tables:
``f1`` (a column per dataset x gold size, and per further test set) and ``per_type``.  Usage: docs/reproducing.md.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd

from aclm.base.registry import METHODS
from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import Block, GoldSize, Grid, expand, load_grid, with_test_set
from aclm.stages.layout import FAILED, RESULT, S1_EVAL, S7_EVAL
from aclm.tables.aggregate import Report, assemble, read_reference, template_fields, test_sets
from aclm.tables.runs import Run, RunError, Settings, differing, method_id, of_file, shown

#: Welch's t-test, as in the paper: ACLM against the best baseline (any method not ACLM's own, variants too).
COMPARED = "aclm"
BASELINES = tuple(m.name for m in METHODS.values() if m.generation != "aclm")
#: a label longer than this names its first keys and a hash of the config
LABEL_WIDTH = 80
GROUPING_NOTE = ("Seeds: an entry averages only runs of one profile and one config (all recorded keys but seed, "
                 "data_dir, run_dir, device, storage.*); [key=value] labels the rows of one method and setting "
                 "whose configs differ.")


# --- finding runs --------------------------------------------------------------------------

def matching_files(pattern: str) -> list[Path]:
    """The files a path or glob names (folders searched); a glob for result.json also finds a failed run's."""
    if not glob.has_magic(pattern) and not Path(pattern).exists():
        raise RunError(f"{pattern}: no such file or folder")
    patterns = [pattern] + ([pattern[: -len(RESULT)] + FAILED] if pattern.endswith(RESULT) else [])
    found = [Path(p) for each in patterns for p in glob.glob(each, recursive=True)]
    return [f for path in found for f in ([*path.rglob(RESULT), *path.rglob(FAILED)] if path.is_dir() else [path])]


def find_runs(patterns: Sequence[str]) -> list[Run]:
    """The runs under ``patterns``, once each, in table order; a failed.json beside a result is stale and left out."""
    files: dict[Path, Path] = {}
    for path in (path for pattern in patterns for path in matching_files(pattern)):
        if path.parent.name in (S1_EVAL, S7_EVAL) and (path.name == RESULT or (
                path.name == FAILED and not (path.parent / RESULT).exists())):
            files.setdefault(path.parent.resolve(), path)
    if not files:
        raise RunError(f"no result.json or failed.json of a run under {' '.join(patterns)}")
    return sorted(labelled([of_file(path) for path in files.values()]), key=run_order)


# --- which runs are seeds of one entry -----------------------------------------------------

def agrees(value: str, given: str) -> bool:
    """Whether a command line's ``given`` text names the config's JSON ``value``."""
    import yaml

    ours = json.loads(value)
    try:
        theirs = yaml.safe_load(given)
    except yaml.YAMLError:
        theirs = given
    return ours == theirs or str(ours) == given or value == given


def entry_of(run: Run, configs: dict[Settings, dict[str, str]]) -> tuple:
    """Which entry of its method and setting a run is a seed of: its config's, or a failed run's the one
    config its command agrees with (keys no run of its method and setting recorded are beside the point)."""
    if run.settings is not None:
        return ("config", run.settings)
    if run.result is not None:
        return ("unrecorded",)
    relevant = {k: v for k, v in run.overrides if not configs or any(k in c for c in configs.values())}
    if not configs and not relevant:     # nothing recorded to hold it to (older files): with those runs
        return ("unrecorded",)
    matches = [s for s, c in configs.items() if all(k in c and agrees(c[k], v) for k, v in relevant.items())]
    return ("config", matches[0]) if len(matches) == 1 else ("command", tuple(sorted(relevant.items())))


def short_hash(entry: tuple) -> str:
    return hashlib.sha256(repr(entry).encode()).hexdigest()[:6]


def entry_label(entry: tuple, keys: list[str]) -> str:
    """An entry's differing ``keys`` (a config's), or the words of a failed run's command."""
    if entry[0] == "config":
        parts = [f"{k}={shown(dict(entry[1]).get(k))}" for k in keys]
    else:
        parts = [f"{k}={v}" for k, v in (entry[1] if entry[0] == "command" else ())] or ["config not recorded"]
    text = ", ".join(parts)
    if len(text) > LABEL_WIDTH:
        return f"{', '.join(parts[:2])}, … +{len(parts) - 2} keys #{short_hash(entry)}"
    return text


def entry_labels(entries: list[tuple]) -> dict[tuple, str]:
    """A unique label per entry of one method and setting: the config keys that differ (none for a lone entry)."""
    if len(entries) < 2:
        return {entry: "" for entry in entries}
    keys = differing([dict(e[1]) for e in entries if e[0] == "config"])
    labels = {entry: entry_label(entry, keys) for entry in entries}
    seen = Counter(labels.values())
    return {entry: f"{text} #{short_hash(entry)}".strip() if seen[text] > 1 else text for entry, text in labels.items()}


def labelled(runs: list[Run]) -> list[Run]:
    """The runs, each labelled with what sets its entry apart within its method and setting (and setting variant)."""
    buckets: dict[tuple, list[Run]] = {}
    for run in runs:    # the runs that would be one entry were configs not compared: one method and setting
        key = run.profile, run.method, run.variant, run.setting_variant, run.dataset, str(run.gold)
        buckets.setdefault(key, []).append(run)
    out = []
    for members in buckets.values():
        configs = {run.settings: dict(run.settings) for run in members if run.settings is not None}
        entries = [entry_of(run, configs) for run in members]
        check_one_run_per_seed(members, entries)
        labels = entry_labels(sorted(set(entries), key=natural))
        for run, entry in zip(members, entries):
            label = "; ".join(part for part in (run.setting_variant, labels[entry]) if part)
            out.append(replace(run, label=label, sweep=(run.variant + (f"[{label}]" if label else "")) or None))
    return out


def check_one_run_per_seed(runs: Sequence[Run], entries: Sequence[tuple]) -> None:
    """A seed counts once in a mean: two runs of one entry and seed (copies under two run folders) are an error."""
    seen: dict[tuple, Run] = {}
    for run, entry in zip(runs, entries):
        first = seen.setdefault((entry, run.seed), run)
        if first is not run:
            raise RunError(
                f"two runs of one entry ({run.profile}, {run.dataset}, gold {run.gold}, "
                f"{run.method}{'@' + run.variant if run.variant else ''}) have seed {run.seed}: "
                f"{first.result_path.parent} and {run.result_path.parent}; a seed counts once in a mean: "
                f"name the runs of one of them only (a narrower path or glob)")


def natural(value: Any) -> tuple:
    """A sort key that puts ``epochs=5`` before ``epochs=10`` (and gold 100 before 1000 and ``full``)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", repr(value)))


def run_order(run: Run) -> tuple:
    """Method table order (others after), then variant, label, profile, dataset, gold size and seed."""
    rank = list(METHODS).index(run.method) if run.method in METHODS else len(METHODS)
    return rank, run.method, run.variant, natural(run.label), run.profile, run.dataset, natural(run.gold), run.seed


# --- the tables' grids ---------------------------------------------------------------------

def literal(text: str) -> str:
    """``text`` as a column template that formats to itself (a dataset folder's name may hold braces)."""
    return text.replace("{", "{{").replace("}", "}}")


def f1_columns(dataset: str, gold: GoldSize, results: list[dict], profile: str = "") -> dict[str, str]:
    """The F1 columns of one dataset and gold size: its own test set, then every other one scored."""
    base = f"{profile + ': ' if profile else ''}{dataset} gold{gold}"
    others = dict.fromkeys(name for result in results for name in result.get("test", {}) if name != dataset)
    return {literal(base): "f1", **{literal(f"{base} → {name}"): f"test.{name}.f1" for name in others}}


def type_columns(dataset: str, gold: GoldSize, results: list[dict], profile: str = "") -> dict[str, str]:
    """The per-type table's columns of one dataset and gold size: every entity type its runs were scored on."""
    return {literal(t): f"per_type.{t}.f1" for t in dict.fromkeys(t for r in results for t in r.get("per_type", {}))}


TABLES = {
    "f1": ("Span micro F1 of the runs found", {"method": "{method_name}"}, f1_columns),
    "per_type": ("F1 per entity type of the runs found",
                 {"dataset": "{dataset}", "gold": "{gold}", "method": "{method_name}"}, type_columns),
}


def method_names(runs: Sequence[Run], paper: Optional[Grid]) -> dict[str, str]:
    """A row name for every method, variant and label present: the paper grid's name for a method, else ours."""
    names = {**{m.name: m.title for m in METHODS.values()},
             **({k: v for k, v in paper.method_names.items() if "@" not in k} if paper else {})}
    return {method_id(run): names.get(run.method, run.method) + (f" @{run.variant}" if run.variant else "")
            + (f" [{run.label}]" if run.label else "") for run in runs}


def comparison(runs: Sequence[Run], control: Optional[str] = None) -> dict:
    """ACLM's unlabelled row against the baselines present (their variants too), and every entry against ``control``."""
    present = {method_id(run) for run in runs}
    if control is not None and control not in present:
        raise RunError(f"--against {control}: no run of it among the runs found "
                       f"(methods: {', '.join(sorted(present))})")
    compare = {"control": control} if control else {}
    if COMPARED in present:
        baselines = dict.fromkeys(method_id(run) for run in runs if run.method in BASELINES)
        compare.update(method=COMPARED, baselines=list(baselines))
    return compare


def table_grid(name: str, runs: Sequence[Run], paper: Optional[Grid], control: Optional[str] = None
               ) -> tuple[Grid, list[Run], list[str]]:
    """The grid of one table over ``runs`` (a block per profile, dataset and gold size), the runs placed in
    their blocks, and the columns in order.  Several profiles: each names its columns (F1) or rows (per type)."""
    title, index, columns_of = TABLES[name]
    several = len({r.profile for r in runs}) > 1
    if several and name == "per_type":
        index = {"profile": "{profile}", **index}
    settings = sorted({(r.profile, r.dataset, r.gold) for r in runs}, key=lambda s: (s[0], s[1], natural(s[2])))
    blocks, placed, order = [], [], []
    for i, (profile, dataset, gold) in enumerate(settings):
        mine = [replace(r, block=i) for r in runs if (r.profile, r.dataset, r.gold) == (profile, dataset, gold)]
        results = [r.result for r in mine if r.result is not None]
        columns = columns_of(dataset, gold, results, profile if several else "")
        blocks.append(Block((dataset,), (gold,), tuple(dict.fromkeys(r.method for r in mine)), columns))
        placed += mine
        order += [c.format() for c in columns if c.format() not in order]
    grid = Grid(name=name, title=f"{title}, beside {paper.title}" if paper else title,
                reference=dict(paper.reference) if paper else {}, seeds=(), method_names=method_names(runs, paper),
                index=dict(index), blocks=tuple(blocks), compare=comparison(runs, control),
                plot={"x": "method", "y": order} if name == "f1" else {},      # a panel per column, ours and paper
                shows_dev=name == "f1")                       # a type's column is no test set: the F1 table has dev
    return grid, sorted(placed, key=run_order), order


# --- the paper's numbers beside --------------------------------------------------------------

def paper_numbers(paper: Grid, grid: Grid, runs: Sequence[Run], root: Path = PROJECT_ROOT) -> pd.DataFrame:
    """The paper's number for each of our entries a cell of ``paper`` matches (the same run, a column of the same
    value), in long form; none for a grid averaged over datasets, which matches no single run."""
    columns = [*grid.index, "column", "paper"]
    if paper.average_datasets:
        return pd.DataFrame(columns=columns).astype({"paper": float})
    reference, _ = read_reference(paper, root)
    numbers = {tuple(row[[*paper.index, "column"]]): row["paper"] for _, row in reference.iterrows()}
    cells = {}
    for form in (paper, with_test_set(paper, "official")):    # runs on the slices, or on the official test sets
        for profile in sorted({run.profile for run in runs}):
            for cell in expand(form, profile):
                cells.setdefault((profile, cell.dataset, str(cell.gold), cell.method, cell.variant), (form, cell))
    rows = []
    for run in runs:
        form, cell = cells.get((run.profile, run.dataset, str(run.gold), run.method, run.variant), (None, None))
        if cell is None:
            continue
        theirs, ours = template_fields(paper, cell), template_fields(grid, run)
        index = {key: template.format(**ours) for key, template in grid.index.items()}
        our_column = {path: column.format(**ours) for column, path in grid.blocks[run.block].columns.items()}
        key = tuple(template.format(**theirs) for template in paper.index.values())
        rows += [{**index, "column": our_column[path], "paper": numbers.get((*key, column.format(**theirs)), math.nan)}
                 for column, path in form.blocks[cell.block].columns.items() if path in our_column]
    return pd.DataFrame(rows, columns=columns).astype({"paper": float}).drop_duplicates([*grid.index, "column"])


# --- the tables ------------------------------------------------------------------------------

def tabulate(patterns: Sequence[str], paper_name: Optional[str] = None, root: Path = PROJECT_ROOT,
             control: Optional[str] = None) -> list[tuple[Grid, Report]]:
    """The F1 and per-type tables of the runs under ``patterns``, each entry tested against ``control`` if given."""
    runs = find_runs(patterns)
    paper = load_grid(paper_name) if paper_name else None
    profile = ", ".join(sorted({run.profile for run in runs}))
    tested = test_sets(paper.reference.get("test_set") if paper else None, runs)
    reports = []
    for name in TABLES:
        grid, placed, order = table_grid(name, runs, paper, control)
        if order:
            reference = paper_numbers(paper, grid, placed, root) if paper else None
            reports.append((grid, assemble(grid, placed, profile, reference, order, tested, notes=[GROUPING_NOTE])))
    return reports
