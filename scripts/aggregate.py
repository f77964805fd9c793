#!/usr/bin/env python
"""Print a paper table from the runs of its grid, and write it as Markdown, CSV, LaTeX and PNG.

    python scripts/aggregate.py table1 --profile paper [--runs runs] [--out results]
    python scripts/aggregate.py table1 --profile tiny --langs en --sizes 100 --seeds 1

Files go to ``<out>/<profile>/<table>.{md,csv,tex,png}``.  Slices (--langs
--sizes --methods --seeds) choose the entries as in scripts/grid.py.  Table 3
computes perplexities (cached in ``<out>/<profile>/perplexity_cache.json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aclm.tables.grid import GridError, expand, grid_names, load_grid
from aclm.tables.perplexity import MODES
from aclm.tables.report import PerplexityCache, build_report, write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", help=f"a grid in configs/grids ({', '.join(grid_names())})")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--runs", default="runs", help="the run directory root the grid ran under")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--langs")
    parser.add_argument("--sizes")
    parser.add_argument("--methods")
    parser.add_argument("--seeds")
    parser.add_argument("--perplexity", choices=MODES, default="sentence",
                        help="pool per-sentence perplexities (mean) or the corpus's tokens (aclm/tables/perplexity.py)")
    parser.add_argument("--device", default=None, help="device for perplexity (default: cuda if available)")
    args = parser.parse_args()

    grid = load_grid(args.table)
    cells = expand(grid, args.profile, args.runs, args.langs, args.sizes, args.methods, args.seeds)
    out = args.out / args.profile
    perplexity = PerplexityCache(out / "perplexity_cache.json", args.perplexity, args.device)
    report = build_report(grid, cells, args.profile, perplexity)
    written = write_report(report, grid, out)
    print(report.markdown)
    print("wrote " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    try:
        main()
    except GridError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
