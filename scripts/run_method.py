#!/usr/bin/env python
"""Run one method end to end for one setting: every stage it needs, each skipped when current.

    python scripts/run_method.py method=aclm profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/run_method.py method=lwtr profile=tiny dataset=conll2003/en gold=200 seed=1
    python scripts/run_method.py --list                        # the method table
    python scripts/run_method.py --list-stages method=aclm     # a method's chain (every method's without method=)
    python scripts/run_method.py --models method=aclm profile=mini   # the models built here it loads (make's targets)

Prints where the run's result.json is, and its F1.  ``--force`` re-runs every stage, ``--force-from
STAGE`` that stage and every one after it; ``--wait`` waits for another run writing the same folder.
"""

from __future__ import annotations

import textwrap

from aclm.base import registry
from aclm.base.config import load_config
from aclm.run.chain import chain, plan, run_method
from aclm.run.datacheck import built_here
from aclm.run.cli import WHOLE_CHAIN, main_guard, parse, stage_parser, summary
from aclm.run.estimates import duration, guesses, recorded_seconds, rest


def list_methods() -> None:
    """The method table: name, how it generates, what it reads, what it needs."""
    for m in registry.METHODS.values():
        extra = "; ".join(([f"reads {', '.join(m.keys)}"] if m.keys else [])
                          + ([f"needs {', '.join(m.needs)}"] if m.needs else []))
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
            print(textwrap.indent(step.describe(cfg), "  "))


def main() -> None:
    parser = stage_parser(__doc__, WHOLE_CHAIN)
    parser.add_argument("--list", action="store_true", help="print the method table and exit")
    parser.add_argument("--list-stages", action="store_true",
                        help="print the method's chain of stages (every method's without method=) and exit")
    parser.add_argument("--force-from", metavar="STAGE",
                        help="re-run this stage and every stage after it, even if current (--list-stages names them)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print which stages would run and why, and run nothing")
    parser.add_argument("--models", action="store_true",
                        help="print the models built here (models/<folder>/manifest.json, make's targets) that the "
                             "run loads, and exit")
    known = parser.parse_known_args()[0]
    if known.list:
        list_methods()
        return
    if known.list_stages:
        list_stages(known.overrides)
        return
    if known.models:                                    # for make, before any training library loads
        print(" ".join(built_here(load_config(known.overrides, known.config))))
        return
    args, cfg = parse(parser)
    force = chain(cfg)[0].name if args.force else args.force_from
    if args.dry_run:
        states = plan(cfg, force)
        guessed = guesses(cfg, {name: recorded_seconds(cfg, name) for name, state in states if state != "current"})
        for name, state in states:
            seconds = guessed.get(name)
            guess = "" if state == "current" else f"  [{'not known' if seconds is None else duration(seconds)}]"
            print(f"{name:<15} {'current' if state == 'current' else 'would run: ' + state}{guess}")
        print("total: " + (rest(guessed) if guessed else "every stage is current"))
        return
    print(summary(cfg, run_method(cfg, force=force, wait=args.wait)))


if __name__ == "__main__":
    main_guard(main)
