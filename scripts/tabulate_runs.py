#!/usr/bin/env python
"""Print the tables of any finished runs, and write them as Markdown, CSV and LaTeX.

    python scripts/tabulate_runs.py RUN_DIR_OR_GLOB ... [--out DIR] [--paper GRID]
    python scripts/tabulate_runs.py 'runs/tiny/**/result.json'
    python scripts/tabulate_runs.py runs/mini/multiconer/de/gold300 --paper table1
    python scripts/tabulate_runs.py runs/mini_warm/multiconer/en/gold100 --against gold_only_tuned
    make table RUNS_GLOB='runs/tiny/**/result.json' [PAPER=table1]

Each argument is a run folder (searched through), a result.json or failed.json, or a glob of them (quote it:
``**`` spans folders); a glob for result.json also finds the failed.json of a run that failed.  The runs need not
form a grid.  Two tables (aclm/tables/tabulate_runs.py): ``f1`` (a row per method and variant, a column per dataset
x gold size) and ``per_type`` (F1 per entity type), each entry the mean ± std over seeds, with the grids' FAILED
entries and Welch t-test rows (``--against M``: every entry also against method M's, ``[p=…]``).  Only seeds are
averaged: runs of another profile get their own columns, runs of one method and setting whose recorded configs
differ (beyond seed, data_dir, run_dir, device, storage.*) rows of their own, labelled with the keys that differ
(``ACLM [generator.epochs=10]``).  ``--paper`` names a grid whose paper numbers stand beside the entries that are
runs of its cells.  A run made by code changed since counts, with a warning naming that code.  Files go to
``<out>/f1.{md,csv,tex}`` and ``<out>/per_type.{md,csv,tex}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aclm.experiments.grid import GridError, grid_names
from aclm.tables.aggregate import write_report
from aclm.tables.runs import RunError
from aclm.tables.tabulate_runs import tabulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR_OR_GLOB",
                        help="run folders, result.json / failed.json files, or globs of them")
    parser.add_argument("--out", type=Path, default=Path("results") / "tabulate",
                        help="folder for the files (default: %(default)s)")
    parser.add_argument("--paper", metavar="GRID",
                        help=f"a grid whose paper numbers stand beside ({', '.join(grid_names())})")
    parser.add_argument("--against", metavar="METHOD",
                        help="a method id (gold_only_tuned, aclm@entities) every entry is tested against (Welch)")
    args = parser.parse_args()

    written = []
    for grid, report in tabulate(args.runs, args.paper, control=args.against):
        print(report.markdown)
        written += write_report(report, grid, args.out)
    print("wrote " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    try:
        main()
    except (GridError, RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
