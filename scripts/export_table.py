#!/usr/bin/env python
"""Publish a table's artifacts: every cell's gold sample, augmented training set, S6 report, test predictions
and result.json in one folder, with an index and a card (aclm/tables/export_table.py).

    python scripts/export_table.py table1 profile=paper [run_dir=runs] [--out exports] [--tar]
    make export-table1 PROFILE=tiny LANGS=en SIZES=100 SEEDS=1

The cells are chosen by ``key=value`` as in scripts/grid.py (``profile=``, ``run_dir=`` and the slices
``langs= sizes= methods= seeds=``).  The folder is ``<out>/<profile>/<table>/``; ``--tar`` also packs it
as ``<table>.tar.gz`` beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aclm.experiments.grid import SELECTION, grid_names, grid_script, load_grid, selected_cells, selection
from aclm.tables.export_table import export_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", help=f"a grid in configs/grids ({', '.join(grid_names())})")
    parser.add_argument("selection", nargs="*", metavar="key=value",
                        help=f"which cells: {', '.join(f'{k}=' for k in SELECTION)} (see above)")
    parser.add_argument("--out", type=Path, default=Path("exports"), help="where the folder goes (default: exports)")
    parser.add_argument("--tar", action="store_true", help="also pack the folder as a .tar.gz")
    args = parser.parse_args()
    grid, chosen = load_grid(args.table), selection(args.selection)
    cells = selected_cells(grid, chosen)
    print(f"wrote {export_table(grid, cells, chosen['profile'], args.out, args.tar)}")


if __name__ == "__main__":
    grid_script(main)
