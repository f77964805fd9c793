#!/usr/bin/env python
"""S6: parse generations back to CoNLL, drop copies of the source, optionally filter for consistency.

    python scripts/postprocess.py profile=tiny method=aclm dataset=multiconer/en gold=100 seed=1
    python scripts/postprocess.py method=aclm postprocess.consistency_filter=true ...

Reads the method's generation stage and writes <run>/<method>/s6_postprocess/
aug.conll, gold+aug.conll and report.json (generated, dropped per reason, kept,
diversity).
"""

from __future__ import annotations

from aclm.cli import main_guard, parse, stage_parser
from aclm.methods import generation_stage
from aclm.pipeline import postprocess_stage


def main() -> None:
    args, cfg = parse(stage_parser(__doc__))
    out = postprocess_stage(cfg, generation_stage(cfg), force=args.force)
    print(f"augmentations: {out}")


if __name__ == "__main__":
    main_guard(main)
