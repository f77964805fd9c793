#!/usr/bin/env python
"""Run one method end to end for one setting: every stage it needs, each skipped when current.

    python scripts/run_method.py method=aclm profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/run_method.py method=lwtr profile=tiny dataset=conll2003/en gold=200 seed=1

Prints where the run's result.json is, and its F1.
"""

from __future__ import annotations

from aclm.cli import main_guard, parse, stage_parser
from aclm.io import read_json
from aclm.methods import run_method


def main() -> None:
    _, cfg = parse(stage_parser(__doc__))
    out = run_method(cfg)
    result = read_json(out / "result.json")
    print(f"{cfg.method} on {cfg.dataset} (gold {cfg.gold}, seed {cfg.seed}): F1 {result['f1']:.2f}  "
          f"[{out / 'result.json'}]")


if __name__ == "__main__":
    main_guard(main)
