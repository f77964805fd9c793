#!/usr/bin/env python
"""Expand a paper table's grid into runs: a Makefile fragment, a command list, or one run.

    python scripts/grid.py makefile table1 profile=paper langs=en sizes=100 seeds=1
    python scripts/grid.py list table1 profile=paper --phase 0        # one command a line
    python scripts/grid.py check profile=paper                        # grids agree on shared runs
    python scripts/grid.py prune table1 profile=paper                 # drop finished settings' S1 weights
    python scripts/grid.py cell <result.json> method=aclm profile=...  # one run, failed.json on error
    python scripts/grid.py submit table1 profile=paper --slurm [--dry-run]  # job arrays, then the table
    python scripts/grid.py jobs table1 profile=paper                  # runs one GPU holds at once (JOBS=auto)

The cells are chosen by ``key=value`` as a stage script's config: ``profile=`` (default paper), ``run_dir=``
(default runs) and the slices ``langs=`` (datasets, or their last part: en matches multiconer/en), ``sizes=``,
``methods=`` and ``seeds=`` (replacing the grid's), each a comma-separated list; ``test_set=official`` scores a
MultiCoNER grid on the official MultiCoNER v1 test sets instead of the data folder's 2,000-sentence slices (default
``slice``; ``makefile``, ``list`` and ``submit`` stop at once when the release's files are missing).
``rounds_on_dev=1,2,5,10`` runs every augmentation method at each R and tabulates, per seed, the R with the best dev
F1 (off unless given). ``makefile`` writes the fragment atomically (``<run_dir>/<profile>/grids/``) and prints its
path. ``submit`` sends the runs that are not done to Slurm (``aclm/experiments/slurm.py``; resources in
configs/cluster.yaml; docs/cluster.md); ``--dry-run`` prints the batch scripts instead. ``jobs`` prints how many
runs to start at once on this machine's GPU, from the measured CUDA peaks and the card's free memory
(``aclm/experiments/packing.py``); ``make ... JOBS=auto`` uses it. See ``aclm/experiments/grid.py`` for make and GNU
parallel.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Iterator

from aclm.base.config import load_config
from aclm.base.io import atomic_write_text
from aclm.base.signals import handle_signals
from aclm.experiments.grid import (SELECTION, SLICE, SLICES, cell_command, conflicts, expand, fragment_path,
                                   grid_names, grid_script, load_grid, makefile, parse_slice, prune_finished_s1,
                                   require_test_set_data, run_cell, selected_cells, selection, with_prerequisites,
                                   with_test_set)
from aclm.experiments.packing import choose, length_ratios
from aclm.experiments.slurm import CLUSTER_FILE, Places, load_cluster, plan, plan_jobs, submit, summary


def add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selection", nargs="*", metavar="key=value",
                        help=f"which cells: {', '.join(f'{k}=' for k in SELECTION)} (see above)")


def add_grid_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", help=f"a grid in configs/grids ({', '.join(grid_names())})")
    add_selection(parser)
    parser.add_argument("--python", default=sys.executable, help="interpreter the commands use")


def slices(chosen: dict) -> dict:
    """What makes a fragment's file name: the slices, a test set other than the slice's own, and R chosen on dev."""
    official = chosen["test_set"] not in (None, SLICE)
    return {**{k: parse_slice(chosen[k]) for k in SLICES}, "test_set": [chosen["test_set"]] if official else None,
            "rounds_on_dev": parse_slice(chosen.get("rounds_on_dev"))}


def add_submit_args(parser: argparse.ArgumentParser) -> None:
    add_grid_args(parser)
    scheduler = parser.add_mutually_exclusive_group(required=True)
    scheduler.add_argument("--slurm", action="store_true", help="submit to Slurm (the one scheduler supported)")
    parser.add_argument("--dry-run", action="store_true", help="print the batch scripts; submit nothing")
    parser.add_argument("--results", default="results", help="where the table job writes (aggregate.py --out)")
    parser.add_argument("--cluster-config", type=Path, default=CLUSTER_FILE,
                        help="the YAML file with the cluster: section (resources per phase)")
    parser.add_argument("--partition", help="sbatch --partition (overrides the file's)")
    parser.add_argument("--account", help="sbatch --account (overrides the file's)")


def aggregate_args(chosen: dict, results: str) -> list[str]:
    """scripts/aggregate.py's arguments for the same cells."""
    return [*(f"{k}={v}" for k, v in chosen.items() if v), "--out", results]


def stages_of(cells) -> Iterator[str]:
    """The stages the cells' runs go through, lazily (one chain per method and override set: they repeat)."""
    from aclm.run.chain import chain

    kinds = {(c.method, c.variant, c.overrides): c for c in cells}
    yield from {step.name for c in kinds.values() for step in chain(c.config())}


def submit_grid(grid, cells, chosen: dict, args: argparse.Namespace) -> None:
    """Submit (or, with --dry-run, print) the job arrays of the runs that are not done, then the table job."""
    cluster = load_cluster(args.cluster_config, args.partition, args.account)
    arrays, done = plan(cells, grid.name)
    places = Places.of(chosen["run_dir"], chosen["profile"], grid.name, Path.cwd())
    runs = done + sum(len(a.tasks) for a in arrays)
    table = aggregate_args(chosen, args.results)
    if args.dry_run:
        jobs = plan_jobs(arrays, grid.name, cluster, places, args.python, table)
        for job in jobs:
            print(f"# ---- {job.name} " + "-" * 40 + f"\n{job.script}")
    else:
        jobs = submit(arrays, grid.name, cluster, places, args.python, table)
    print(summary(jobs, runs, done))
    print(f"logs: {places.logs}/<run>.log" + ("" if args.dry_run else f"; scripts and job IDs: {places.submission}"))


def profile_generator(profile: str) -> str:
    """The generator whose tokens S4's and S5's memory is counted in (the profile's)."""
    return str(load_config([f"profile={profile}"]).generator.model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add_grid_args(sub.add_parser("makefile", help="write the grid's Makefile fragment; print its path"))
    lister = sub.add_parser("list", help="print one command per cell (prerequisites first)")
    add_grid_args(lister)
    lister.add_argument("--phase", type=int, choices=(0, 1, 2),
                        help="only 0: S1, 1: augmentation methods, 2: WikiNEuRal (run in this order)")
    add_grid_args(sub.add_parser("prune", help="delete the S1 weights of the settings whose runs are all done"))
    add_submit_args(sub.add_parser("submit", help="submit the runs not done to Slurm as job arrays, then the table"))
    jobs = sub.add_parser("jobs", help="print how many runs to start at once on this GPU (the reason on stderr)")
    add_grid_args(jobs)
    jobs.add_argument("--ledger", type=Path, metavar="FILE",
                      help="count runs by their tagger and write FILE, the ledger their stages lease GPU memory "
                           "from (run them with ACLM_GPU_LEDGER=FILE; aclm/engine/memory.py)")
    check = sub.add_parser("check", help="fail if two grids would write one result with different commands")
    add_selection(check)
    cell = sub.add_parser("cell", help="run one cell; write failed.json beside its result if it fails")
    cell.add_argument("result", type=Path, help="the result.json the run must produce")
    cell.add_argument("overrides", nargs="+", metavar="key=value")
    args = parser.parse_args()
    handle_signals()

    if args.command == "cell":
        sys.exit(run_cell(args.result, args.overrides))
    chosen = selection(args.selection)
    if args.command == "check":
        grids = [with_test_set(load_grid(name), chosen["test_set"]) for name in grid_names()]
        cells = [c for g in grids for c in expand(g, chosen["profile"], chosen["run_dir"])]
        clashes = conflicts(cells)
        print("\n".join(clashes) or f"{len(grid_names())} grids agree on every shared run")
        sys.exit(1 if clashes else 0)
    grid = load_grid(args.table)
    cells = selected_cells(grid, chosen)
    if args.command in ("makefile", "list", "submit"):
        require_test_set_data(cells, chosen["test_set"])
    if args.command == "jobs":
        packing = choose(stages_of(with_prerequisites(cells)), Path(chosen["run_dir"]), chosen["profile"],
                         args.ledger, lambda: length_ratios({c.dataset for c in cells}, profile_generator(chosen["profile"])))
        print(packing.reason, file=sys.stderr)
        print(packing.runs)
    elif args.command == "prune":
        settings, freed = prune_finished_s1(cells)
        print(f"pruned the S1 weights of {settings} finished settings: {freed / 1e9:.2f} GB freed")
    elif args.command == "submit":
        submit_grid(grid, cells, chosen, args)
    elif args.command == "makefile":
        title = f"{grid.name} ({grid.title}) for profile {chosen['profile']}: {len(cells)} cells"
        path = fragment_path(chosen["run_dir"], chosen["profile"], grid.name, slices(chosen))
        atomic_write_text(path, makefile(cells, title, args.python))
        print(path)
    else:
        for c in with_prerequisites(cells):
            if args.phase is None or c.phase == args.phase:
                print(shlex.join([args.python, *cell_command(c)]))


if __name__ == "__main__":
    grid_script(main)
