#!/usr/bin/env python
"""Run one method end to end for one setting: every stage it needs, each skipped when current.

    python scripts/run_method.py method=aclm profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/run_method.py method=lwtr profile=tiny dataset=conll2003/en gold=200 seed=1

Prints where the run's result.json is, and its F1.  ``--list`` prints the method table.
"""

from __future__ import annotations

import argparse

from aclm.base import registry
from aclm.base.io import read_json
from aclm.run.chain import result_dir
from aclm.run.cli import main_guard, parse, stage_parser
from aclm.run.layout import RESULT


def list_methods() -> None:
    """The method table: name, how it generates, what it reads, what it needs."""
    for m in registry.METHODS.values():
        extra = f"reads {', '.join(m.reads)}" if m.reads else ""
        extra += f"; needs {', '.join(m.needs)}" if m.needs else ""
        print(f"{m.name:<17} {m.generation:<8} {m.summary}" + (f"  [{extra}]" if extra else ""))


def main() -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--list", action="store_true", help="print the method table and exit")
    if parser.parse_known_args()[0].list:
        list_methods()
        return
    _, cfg = parse(parser)
    out = result_dir(cfg)
    result = read_json(out / RESULT)
    print(f"{cfg.method} on {cfg.dataset} (gold {cfg.gold}, seed {cfg.seed}): F1 {result['f1']:.2f}  "
          f"[{out / RESULT}]")


if __name__ == "__main__":
    main_guard(main)
