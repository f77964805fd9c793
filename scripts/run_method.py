#!/usr/bin/env python
"""Run one method end to end for one setting: every stage it needs, each skipped when current.

    python scripts/run_method.py method=aclm profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/run_method.py method=lwtr profile=tiny dataset=conll2003/en gold=200 seed=1
    python scripts/run_method.py --list                        # the method table
    python scripts/run_method.py --list-stages method=aclm     # a method's chain (every method's without method=)

Prints where the run's result.json is, and its F1.
"""

from __future__ import annotations

from aclm.base import registry
from aclm.run import outputs
from aclm.run.chain import chain, result_dir
from aclm.run.cli import main_guard, parse, stage_parser


def list_methods() -> None:
    """The method table: name, how it generates, what it reads, what it needs."""
    for m in registry.METHODS.values():
        extra = f"reads {', '.join(m.reads)}" if m.reads else ""
        extra += f"; needs {', '.join(m.needs)}" if m.needs else ""
        print(f"{m.name:<17} {m.generation:<8} {m.summary}" + (f"  [{extra}]" if extra else ""))


def list_stages(overrides: list[str]) -> None:
    """The method's chain under this config (the consistency filter and storage keys change it); every
    method's without ``method=``."""
    given = any(o.startswith("method=") for o in overrides)
    for words in [overrides] if given else [[*overrides, f"method={name}"] for name in registry.METHODS]:
        _, cfg = parse(stage_parser(__doc__), words)
        augment = registry.get(cfg.method).augment
        print(cfg.method + (f" (augment: {augment})" if augment else "") + ":")
        for step in chain(cfg):
            print(f"  {step.describe()}")


def main() -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--list", action="store_true", help="print the method table and exit")
    parser.add_argument("--list-stages", action="store_true",
                        help="print the method's chain of stages (every method's without method=) and exit")
    known = parser.parse_known_args()[0]
    if known.list:
        list_methods()
        return
    if known.list_stages:
        list_stages(known.overrides)
        return
    _, cfg = parse(parser)
    out = result_dir(cfg)
    result = outputs.result(out)
    print(f"{cfg.method} on {cfg.dataset} (gold {cfg.gold}, seed {cfg.seed}): F1 {result['f1']:.2f}  "
          f"[{out / 'result.json'}]")


if __name__ == "__main__":
    main_guard(main)
