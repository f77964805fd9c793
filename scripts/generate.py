#!/usr/bin/env python
"""S5: generate R augmentations per training sentence with mixner.

    python scripts/generate.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/generate.py method=aclm generation.mixner.mode=code ...   # 3 plain + 2 mixed rounds

Writes <run>/<method>/s5_generate/generations.jsonl: per attempt its source,
round, mixner partner, template, decoded text and status (kept, duplicate,
malformed:<reason>)."""

from __future__ import annotations

from aclm.cli import main_guard, parse, stage_parser
from aclm.pipeline import generate_stage


def main() -> None:
    args, cfg = parse(stage_parser(__doc__))
    out = generate_stage(cfg, force=args.force)
    print(f"generations: {out}")


if __name__ == "__main__":
    main_guard(main)
