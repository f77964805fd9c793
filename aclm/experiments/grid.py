"""Experiment grids: the runs a paper table needs, as commands and as a Makefile.

A grid (``configs/grids/<table>.yaml``, schema in configs/grids/README.md) lists blocks of datasets x gold sizes
x methods (x sweep values) x seeds; :func:`expand` turns a slice of it into cells, one ``run_method.py`` command
and one ``result.json`` each.  The methods of a setting share its S1, so every method cell has the setting's
Gold-only cell as a prerequisite (and WikiNEuRal its ACLM cell: it adds as many silver sentences as ACLM added).
In the Makefile a method cell depends order-only on its S1, so ``-j`` never trains one S1 twice at once.  A sweep
point runs as the variant ``<method>@<key>-<value>`` beside the method's plain run and shares its S1.
How to run a grid (make, GNU parallel, Slurm, several GPUs, ``test_set=official``): docs/reproducing.md.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import yaml
from omegaconf import OmegaConf

from aclm.base import registry
from aclm.base.config import load_config
from aclm.base.datasets import registry as dataset_registry
from aclm.base.io import read_json, write_json
from aclm.base.paths import PROJECT_ROOT
from aclm.base.signals import Interrupted
from aclm.engine import Stale, planning, prune
from aclm.stages.layout import FAILED, GOLD_ONLY, S1, RunLayout, dataset_dir_name

GRID_DIR = PROJECT_ROOT / "configs" / "grids"
RUN_SCRIPT = PROJECT_ROOT / "scripts" / "run_method.py"
GRID_SCRIPT = "scripts/grid.py"
SAFE_PATH = re.compile(r"^[\w./+@-]+$")      # make reads "@" in a target as itself: a sweep point's folder
GRID_KEYS = {"title", "reference", "seeds", "method_names", "index", "blocks", "derived", "compare", "plot",
             "average_datasets"}
BLOCK_KEYS = {"datasets", "sizes", "methods", "optional_methods", "overrides", "sweep", "choose", "columns"}
COMPARE_KEYS = {"method", "baselines", "control"}
#: What a block's ``choose`` may say: ``dev``, each method's sweep point with the best dev F1 stands for it.
CHOICES = ("dev",)

GoldSize = Union[int, str]   # a gold sample's size: sentences, or "full"
Slice = Union[str, Sequence, None]                # "en,de", "en de", ["en", "de"] or None (everything)


class GridError(ValueError):
    pass


@dataclass(frozen=True)
class Block:
    datasets: tuple[str, ...]
    sizes: tuple[GoldSize, ...]
    methods: tuple[str, ...]
    columns: dict[str, str]                      # reference column template -> value path in result.json
    overrides: dict[str, Any] = field(default_factory=dict)
    sweep_key: Optional[str] = None
    sweep_values: dict[str, Any] = field(default_factory=dict)  # label -> config value
    optional: tuple[str, ...] = ()               # methods that run only when a METHODS slice names them
    choose: Optional[str] = None                 # "dev": per seed, the sweep point with the best dev F1 is the entry

    def chosen_methods(self, wanted: Optional[list[str]]) -> tuple[str, ...]:
        """The block's methods a METHODS slice picks (None: all but the optional ones)."""
        if wanted is None:
            return self.methods
        return tuple(m for m in (*self.methods, *self.optional) if m in wanted)


@dataclass(frozen=True)
class Grid:
    name: str
    title: str
    reference: dict                              # {file: ..., where: {column: value}, test_set: ...}
    seeds: tuple[int, ...]
    method_names: dict[str, str]
    index: dict[str, str]                        # reference row-key column -> template
    blocks: tuple[Block, ...]
    derived: dict[str, list[str]] = field(default_factory=dict)
    compare: dict = field(default_factory=dict)  # {method: ..., baselines: [...], control: ...}
    plot: dict = field(default_factory=dict)     # {x: index column, y: [columns]}
    average_datasets: bool = False               # an entry is, per seed, the mean over the grid's datasets
    shows_dev: bool = True                       # dev F1 beside the first column (off: columns are not test sets)


#: A grid keeps no final tagger (840 of them at paper size): scores and predictions are what it is for.
PRUNING = ("storage.keep_final_tagger=false",)


@dataclass(frozen=True)
class Cell:
    """One run: a method on one setting (dataset, gold, seed) under a run dir."""

    profile: str
    dataset: str
    gold: GoldSize
    method: str
    seed: int
    runs: str                                    # the run_dir this cell uses
    overrides: tuple[str, ...] = ()              # extra key=value, as passed to run_method.py
    sweep: Optional[str] = None                  # the sweep label, for the table layout
    block: int = 0
    variant: str = ""                            # a sweep point's method directory suffix
    variant_overrides: tuple[str, ...] = ()      # the swept key=value (not passed to S1)

    @property
    def layout(self) -> RunLayout:
        data_dir = next((o.split("=", 1)[1] for o in self.overrides if o.startswith("data_dir=")), None)
        return RunLayout(self.runs, self.profile, dataset_dir_name(self.dataset, data_dir), self.gold, self.seed,
                         self.method, self.variant)

    @property
    def phase(self) -> int:
        """0: S1; then each method after the methods it needs (the method table's phase)."""
        return registry.get(self.method).phase

    def config(self):
        return load_config(self.args())

    def is_done(self) -> bool:
        """Its result exists and every stage of its chain is current for the cell's config (the chain is
        imported here so that reading a grid, as the tables do, imports no run machinery)."""
        from aclm.run.chain import run_method

        if not self.layout.result_path.exists():
            return False
        with planning():
            try:
                run_method(self.config())
            except (Stale, FileNotFoundError):
                return False
        return True

    def args(self) -> list[str]:
        variant = [f"variant={self.variant}", *self.variant_overrides] if self.variant else []
        return [f"method={self.method}", f"profile={self.profile}", f"dataset={self.dataset}",
                f"gold={self.gold}", f"seed={self.seed}", f"run_dir={self.runs}", *PRUNING, *self.overrides,
                *variant]

    def prerequisites(self) -> list["Cell"]:
        """The setting's S1 (Gold-only) run and the runs of the methods this one needs (method table)."""
        plain = replace(self, variant="", variant_overrides=())   # sweep points share the setting's S1
        needs = [] if self.method == GOLD_ONLY else [replace(plain, method=GOLD_ONLY)]
        return needs + [replace(plain, method=m) for m in registry.get(self.method).needs]


# --- loading -------------------------------------------------------------------------------

def grid_names() -> list[str]:
    return sorted(p.stem for p in GRID_DIR.glob("*.yaml"))


def _tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _check_keys(where: str, given: Iterable[str], allowed: set[str]) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise GridError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")


def _block(raw: dict, where: str) -> Block:
    _check_keys(where, raw, BLOCK_KEYS)
    missing = [k for k in ("datasets", "sizes", "methods", "columns") if not raw.get(k)]
    if missing:
        raise GridError(f"{where}: needs {missing}")
    methods, optional = _tuple(raw["methods"]), _tuple(raw.get("optional_methods") or ())
    bad = [m for m in (*methods, *optional) if m not in registry.METHODS]
    if bad:
        raise GridError(f"{where}: unknown methods {bad}")
    sweep = raw.get("sweep") or {}
    if sweep and set(sweep) != {"key", "values"}:
        raise GridError(f"{where}: sweep needs exactly key and values")
    if raw.get("choose") is not None and (raw["choose"] not in CHOICES or not sweep):
        raise GridError(f"{where}: choose: {raw['choose']!r}: give choose: dev, with a sweep to choose from")
    return Block(datasets=_tuple(raw["datasets"]), sizes=_tuple(raw["sizes"]), methods=methods,
                 columns=dict(raw["columns"]), overrides=dict(raw.get("overrides") or {}),
                 sweep_key=sweep.get("key"), sweep_values={str(k): v for k, v in (sweep.get("values") or {}).items()},
                 optional=optional, choose=raw.get("choose"))


def load_grid(name: str, grid_dir: Path = GRID_DIR) -> Grid:
    """Read and check ``<grid_dir>/<name>.yaml``, or the YAML file ``name`` (a grid of one's own)."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else Path(grid_dir) / f"{name}.yaml"
    name = path.stem
    if not path.exists():
        raise GridError(f"no grid {name!r} ({path}); grids: {grid_names()}")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    _check_keys(str(path), raw, GRID_KEYS)
    _check_keys(f"{path} compare", raw.get("compare") or {}, COMPARE_KEYS)
    for key in ("title", "reference", "seeds", "index", "blocks"):
        if not raw.get(key):
            raise GridError(f"{path}: needs {key!r}")
    blocks = tuple(_block(b, f"{path} block {i}") for i, b in enumerate(raw["blocks"]))
    titles = {m: registry.METHODS[m].title for block in blocks for m in (*block.methods, *block.optional)}
    return Grid(name=name, title=raw["title"], reference=dict(raw["reference"]),
                seeds=tuple(int(s) for s in _tuple(raw["seeds"])),
                method_names={**titles, **(raw.get("method_names") or {})},   # unnamed: the method table's title
                index={k: str(v) for k, v in raw["index"].items()},
                blocks=blocks,
                derived={k: list(v) for k, v in (raw.get("derived") or {}).items()},
                compare=dict(raw.get("compare") or {}), plot=dict(raw.get("plot") or {}),
                average_datasets=bool(raw.get("average_datasets", False)))


# --- expansion -----------------------------------------------------------------------------

#: The ``key=value`` words that pick a grid's cells (scripts/grid.py, scripts/aggregate.py), with their defaults.
SLICES = ("langs", "sizes", "methods", "seeds")
SELECTION = {"profile": "paper", "run_dir": "runs", **dict.fromkeys(SLICES), "test_set": None, "rounds_on_dev": None}
#: ``rounds_on_dev=1,2,5,10``: each augmentation method runs at each R, the best on dev (:func:`with_rounds_on_dev`).
ROUNDS = "generation.rounds"
#: ``test_set=`` default (None too): the data folder's 2,000-sentence slices; ``official``: the release the paper
#: scored on, as the ``test_sets`` entry of configs/datasets.yaml names it, with the same gold samples.
SLICE = "slice"

def selection(words: Sequence[str]) -> dict[str, Optional[str]]:
    """``["profile=tiny", "langs=en,de"]`` -> every key of :data:`SELECTION`, defaults filled in."""
    chosen = dict(SELECTION)
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in SELECTION:
            raise GridError(f"{word!r}: expected key=value with a key of {', '.join(SELECTION)}")
        chosen[key] = value
    return chosen


def as_chosen(grid: Grid, chosen: dict[str, Optional[str]]) -> Grid:
    """``grid`` as a :func:`selection` runs and tabulates it: on its ``test_set``, with its ``rounds_on_dev``."""
    return with_rounds_on_dev(with_test_set(grid, chosen.get("test_set")), chosen.get("rounds_on_dev"))


def with_rounds_on_dev(grid: Grid, rounds: Slice) -> Grid:
    """Each block without a sweep split in two: the methods that generate nothing or follow another run as they
    are, every other one swept over ``rounds`` (R) and chosen on dev; the profile's own R is the plain run."""
    values = parse_slice(rounds)
    if not values:
        return grid
    blocks = []
    for block in grid.blocks:
        swept = tuple(m for m in (*block.methods, *block.optional)
                      if registry.get(m).generation != "none" and not registry.get(m).needs)
        if block.sweep_key or not swept:
            blocks.append(block)
            continue
        blocks.append(replace(block, methods=tuple(m for m in block.methods if m not in swept),
                              optional=tuple(m for m in block.optional if m not in swept)))
        blocks.append(replace(block, methods=tuple(m for m in block.methods if m in swept),
                              optional=tuple(m for m in block.optional if m in swept), sweep_key=ROUNDS,
                              sweep_values={f"R={r}": int(r) for r in values}, choose="dev"))
    return replace(grid, blocks=tuple(b for b in blocks if b.methods or b.optional))


def selected_cells(grid: Grid, chosen: dict[str, Optional[str]]) -> list["Cell"]:
    """The cells of ``grid`` a :func:`selection` picks."""
    test_set = chosen.get("test_set")
    moved = as_chosen(grid, chosen)
    if test_set not in (None, SLICE) and not _datasets(moved) & set(test_set_entries(test_set).values()):
        raise GridError(f"test_set={test_set}: grid {grid.name} runs no dataset that has it "
                        f"({', '.join(test_set_entries(test_set))})")
    return expand(moved, chosen["profile"], chosen["run_dir"], *(chosen[k] for k in SLICES))


def test_set_entries(test_set: str) -> dict[str, str]:
    """Each dataset that has ``test_set`` (configs/datasets.yaml ``test_sets``) -> the entry its runs use then."""
    entries = {name: spec.test_sets[test_set] for name, spec in dataset_registry().items() if test_set in spec.test_sets}
    if not entries:
        known = sorted({t for spec in dataset_registry().values() for t in spec.test_sets})
        raise GridError(f"test_set={test_set}: expected one of {', '.join([SLICE, *known])}")
    return entries


def _datasets(grid: Grid) -> set[str]:
    return {d for block in grid.blocks for d in block.datasets}


def with_test_set(grid: Grid, test_set: Optional[str]) -> Grid:
    """``grid`` with each dataset that has ``test_set`` renamed to its entry wherever the blocks name it (result
    paths too: ``test.multiconer/hi.f1``).  Only names change, so the table keeps its layout, and the runs get
    folders of their own: another dev and test set make another setting."""
    if test_set in (None, SLICE):
        return grid
    entries = test_set_entries(test_set)

    def renamed(value: Any) -> Any:
        if isinstance(value, str):
            return ".".join(entries.get(part, part) for part in value.split("."))
        if isinstance(value, (list, tuple)):
            return type(value)(renamed(v) for v in value)
        if isinstance(value, dict):
            return {k: renamed(v) for k, v in value.items()}
        return value

    return replace(grid, blocks=tuple(replace(block, **{f.name: renamed(getattr(block, f.name)) for f in fields(block)})
                                      for block in grid.blocks))


def missing_data(cells: Sequence["Cell"]) -> list[str]:
    """The data check's line for each missing file the cells' runs would read; unshipped releases' files first."""
    from aclm.base.data import DataError
    from aclm.base.datasets import get_spec
    from aclm.run.datacheck import dataset_of, missing_files, setting_files

    found: dict[str, bool] = {}                  # line -> shipped with the data folder (said after the others)
    for cell in {(c.dataset, c.gold, c.overrides): c for c in cells}.values():
        config = cell.config()
        try:
            files = setting_files(config)
        except (DataError, KeyError) as err:
            found.setdefault(str(err).strip("'\""), True)
            continue
        for role, path in files.items():
            for line in missing_files({role: path}, config):
                found.setdefault(line, not get_spec(dataset_of(role)).obtain)
    return sorted(found, key=found.get)          # stable: each group in the order found


def require_test_set_data(cells: Sequence["Cell"], test_set: Optional[str]) -> None:
    """With ``test_set=official``, stop before any run when a file of the release is missing: the data folder
    does not ship it, and otherwise every run would start only to fail its data check."""
    if test_set != "official":
        return
    missing = missing_data(cells)
    if missing:
        more = f" (and {len(missing) - 1} more files missing)" if len(missing) > 1 else ""
        raise GridError(f"test_set=official: {missing[0]}{more}")


def parse_slice(value: Slice) -> Optional[list[str]]:
    """``"en,de"``, ``"en de"`` or a list -> ``["en", "de"]``; empty -> None (no slice)."""
    if value is None:
        return None
    items = value.replace(",", " ").split() if isinstance(value, str) else [str(v) for v in value]
    return items or None


def format_value(value: Any) -> str:
    """A config value as OmegaConf's dotlist reads it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return "null" if value is None else str(value)


@lru_cache(maxsize=None)
def profile_value(profile: str, method: str, key: str, overrides: tuple[str, ...]) -> Any:
    """The value ``key`` has in a cell before any sweep."""
    return OmegaConf.select(load_config([f"profile={profile}", f"method={method}", *overrides]), key)


def _check_slice(name: str, wanted: Optional[list[str]], available: Iterable[str]) -> None:
    available = set(available)
    unmatched = [w for w in wanted or () if w not in available]
    if unmatched:
        raise GridError(f"{name}={','.join(unmatched)} matches nothing in this grid "
                        f"(it has {', '.join(sorted(available))})")


def expand(grid: Grid, profile: str, runs: str = "runs", langs: Slice = None, sizes: Slice = None,
           methods: Slice = None, seeds: Slice = None) -> list[Cell]:
    """The grid's cells, in a stable order, restricted to the slices given; ``langs`` also matches a dataset
    name's last part (``en``: ``multiconer/en`` and ``conll2003/en``), ``seeds`` replaces the grid's."""
    langs, sizes, methods = parse_slice(langs), parse_slice(sizes), parse_slice(methods)
    seed_list = [int(s) for s in parse_slice(seeds) or grid.seeds]
    datasets = _datasets(grid)
    _check_slice("LANGS", langs, datasets | {d.rsplit("/", 1)[-1] for d in datasets})
    _check_slice("SIZES", sizes, {str(s) for b in grid.blocks for s in b.sizes})
    _check_slice("METHODS", methods, {m for b in grid.blocks for m in (*b.methods, *b.optional)})
    cells = []
    for i, block in enumerate(grid.blocks):
        base = tuple(f"{k}={format_value(v)}" for k, v in block.overrides.items())
        chosen = product([d for d in block.datasets if not langs or {d, d.rsplit("/", 1)[-1]} & set(langs)],
                         [g for g in block.sizes if not sizes or str(g) in sizes], block.chosen_methods(methods))
        cells += [Cell(profile, dataset, gold, method, seed, runs, base, label, i, variant, extra)
                  for dataset, gold, method in chosen
                  for label, extra, variant in _sweep_points(block, profile, method, base) for seed in seed_list]
    return cells


def _sweep_points(block: Block, profile: str, method: str,
                  base: tuple[str, ...]) -> list[tuple[Optional[str], tuple[str, ...], str]]:
    """(label, swept key=value, variant) per sweep value; the profile's own value is the plain run (no variant)."""
    if not block.sweep_key:
        return [(None, (), "")]
    current = profile_value(profile, method, block.sweep_key, base)
    points = []
    for label, value in block.sweep_values.items():
        swept = f"{block.sweep_key}={format_value(value)}"
        variant = re.sub(r"[^\w.+-]", "_", f"{block.sweep_key}-{format_value(value)}")
        points.append((label, (), "") if value == current else (label, (swept,), variant))
    return points


def prune_finished_s1(cells: Sequence[Cell]) -> tuple[int, int]:
    """Delete the S1 weights of every setting whose cells are all done; (settings pruned, bytes freed).
    Only by hand (``scripts/grid.py prune``): a later run that needs a pruned S1 retrains it."""
    settings: dict[Path, list[Cell]] = {}
    for cell in with_prerequisites(cells):
        settings.setdefault(cell.layout.root, []).append(cell)
    pruned = freed = 0
    for root, group in settings.items():
        if (root / S1).exists() and all(c.is_done() for c in group):
            gone = prune(root / S1)
            pruned, freed = pruned + bool(gone), freed + gone
    return pruned, freed


def with_prerequisites(cells: Sequence[Cell]) -> list[Cell]:
    """The cells and every cell they need, once per result path, S1 first."""
    found: dict[Path, Cell] = {}
    todo = list(cells)
    while todo:
        cell = todo.pop(0)
        if cell.layout.result_path not in found:
            found[cell.layout.result_path] = cell
            todo.extend(cell.prerequisites())
    return sorted(found.values(), key=lambda c: c.phase)


def _needed(cell: Cell) -> Iterable[Cell]:
    yield cell
    for need in cell.prerequisites():
        yield from _needed(need)


def conflicts(cells: Iterable[Cell]) -> list[str]:
    """Result paths that two cells (or what they need) would write with different commands."""
    seen: dict[Path, list[str]] = {}
    out = []
    for cell in (n for c in cells for n in _needed(c)):
        previous = seen.setdefault(cell.layout.result_path, cell.args())
        if previous != cell.args():
            out.append(f"{cell.layout.result_path}: {shlex.join(previous)}  vs  {shlex.join(cell.args())}")
    return out


# --- commands and Makefile -----------------------------------------------------------------

def cell_command(cell: Cell) -> list[str]:
    """What runs a cell, after the Python interpreter."""
    return [GRID_SCRIPT, "cell", str(cell.layout.result_path), *cell.args()]


def _make_word(word: str) -> str:
    return shlex.quote(word).replace("$", "$$")


def _target(cell: Cell) -> str:
    path = str(cell.layout.result_path)
    if not SAFE_PATH.match(path):
        raise GridError(f"{path}: make cannot use this path as a target (keep to letters, digits and ./+-_@)")
    return path


def makefile(cells: Sequence[Cell], title: str, python: str) -> str:
    """A Makefile fragment: ``all`` builds ``cells``; one file target per cell and prerequisite."""
    everything = with_prerequisites(cells)
    clashes = conflicts(cells)
    if clashes:
        raise GridError("cells disagree on a run:\n" + "\n".join(clashes))
    lines = [f"# {title}", "# Written by scripts/grid.py; regenerate it rather than edit it.",
             "# A run whose result is missing, or whose stages are not current for its config, or that",
             "# needs such a run, depends on FORCE and runs (only its changed stages do work); the others",
             "# are done.",
             f"PYTHON ?= {python}", "", ".PHONY: all s1 FORCE", "FORCE:", "",
             "all: " + " ".join(_target(c) for c in cells), "",
             "s1: " + " ".join(_target(c) for c in everything if c.method == GOLD_ONLY), ""]
    pending = to_run(everything)
    for cell in everything:
        needs = " ".join(_target(p) for p in cell.prerequisites())
        force = " FORCE" if cell.layout.result_path in pending else ""
        lines.append(f"{_target(cell)}:{force}" + (f" | {needs}" if needs else ""))
        lines.append("\t$(PYTHON) " + " ".join(_make_word(w) for w in cell_command(cell)))
        lines.append("")
    return "\n".join(lines)


def to_run(cells: Sequence[Cell]) -> set[Path]:
    """The result paths of ``cells`` that must run: those not done, and those that need one of them (a run
    that reads another's result, as Gold-only-budget reads ACLM's, is stale once that one reruns)."""
    pending = {cell.layout.result_path for cell in cells if not cell.is_done()}
    while grown := {c.layout.result_path for c in cells
                    if any(p.layout.result_path in pending for p in c.prerequisites())} - pending:
        pending |= grown
    return pending


def fragment_path(runs: str, profile: str, name: str, slices: dict[str, Optional[list[str]]]) -> Path:
    """Where a grid's fragment goes; a sliced grid gets its own file so concurrent makes never share one."""
    key = ";".join(f"{k}={','.join(v)}" for k, v in sorted(slices.items()) if v)
    suffix = "-" + hashlib.sha256(key.encode()).hexdigest()[:10] if key else ""
    return Path(runs) / profile / "grids" / f"{name}{suffix}.mk"


# --- one cell, recording failures ----------------------------------------------------------

def grid_script(main: Callable[[], None]) -> None:
    """A grid script's entry point: a :class:`GridError` is one line and exit 2; SIGINT / SIGTERM exit 130 / 143."""
    try:
        main()
    except GridError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except Interrupted as stop:
        sys.exit(stop.exit_code)


def failure(failed: Path) -> str:
    """The error a failed run recorded in its ``failed.json`` (:func:`run_cell` writes it)."""
    return read_json(failed).get("error", "failed")


def run_cell(result: Path, args: list[str], python: str = sys.executable, tail_lines: int = 40) -> int:
    """Run one cell; on failure write ``failed.json`` (error, exit code, log tail) beside its result.
    The error is stderr's last line (``error: ...`` from main_guard, or a traceback's)."""
    result = Path(result)
    failed = result.parent / FAILED
    failed.unlink(missing_ok=True)
    command = [python, str(RUN_SCRIPT), "--as-named", *args]     # the grid names its cells' folders itself
    tail: deque[str] = deque(maxlen=tail_lines)
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line.rstrip("\n"))
        code = proc.wait()
    except BaseException:                 # this wrapper was stopped (SIGTERM, Ctrl-C): stop its run too, cleanly
        proc.terminate()
        proc.wait()
        raise
    if code == 0 and result.exists():
        return 0
    lines = [t for t in tail if t.strip()]
    if code == 0:
        error = f"run_method.py finished but wrote no {result} (run layout changed?)"
    else:
        error = lines[-1].strip() if lines else f"exit status {code}"
    write_json(failed, {"error": error, "returncode": code, "command": shlex.join(command),
                        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        "log_tail": list(tail)})
    return code or 1
