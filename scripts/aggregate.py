#!/usr/bin/env python
"""Print a paper table from the runs of its grid, and write it as Markdown, CSV, LaTeX and PNG.

    python scripts/aggregate.py table1 profile=paper [run_dir=runs] [--out results]
    python scripts/aggregate.py table1 profile=tiny langs=en sizes=100 seeds=1

Files go to ``<out>/<profile>/<table>.{md,csv,tex,png}``.  The cells are chosen by ``key=value`` as in
scripts/grid.py (``profile=``, ``run_dir=``, the slices ``langs= sizes= methods= seeds=``; ``test_set=official``
for the runs on the official MultiCoNER v1 test sets).  The table names the test sets the runs scored on beside the
paper's.  Table 3 computes perplexities (cached in ``<out>/<profile>/perplexity_cache.json`` per augmentation file,
model weights and scoring code: rebuilt weights or edited code score again).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aclm.experiments.grid import SELECTION, as_chosen, grid_names, grid_script, load_grid, selected_cells, selection
from aclm.tables.perplexity import MODES
from aclm.tables.aggregate import PerplexityCache, build_report, write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", help=f"a grid in configs/grids ({', '.join(grid_names())})")
    parser.add_argument("selection", nargs="*", metavar="key=value",
                        help=f"which cells: {', '.join(f'{k}=' for k in SELECTION)} (see above)")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--perplexity", choices=MODES, default="sentence",
                        help="pool per-sentence perplexities (mean) or the corpus's tokens (aclm/tables/perplexity.py)")
    parser.add_argument("--device", default=None, help="device for perplexity (default: cuda if available)")
    args = parser.parse_args()

    chosen = selection(args.selection)
    loaded = load_grid(args.table)
    cells = selected_cells(loaded, chosen)
    grid = as_chosen(loaded, chosen)   # its columns read the runs' test sets; its blocks choose
    out = args.out / chosen["profile"]
    perplexity = PerplexityCache(out / "perplexity_cache.json", args.perplexity, args.device)
    report = build_report(grid, cells, chosen["profile"], perplexity)
    written = write_report(report, grid, out)
    print(report.markdown)
    print("wrote " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    grid_script(main)
