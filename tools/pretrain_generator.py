#!/usr/bin/env python
"""Pretrain a small generator with mBART's denoising objective, offline: a generator that knows language.

    make mini-generator          # = python tools/pretrain_generator.py --out models/mini
    make warm-generator          # = python tools/pretrain_generator.py --kind bert2bert --out models/mini-warm
    python tools/pretrain_generator.py [--kind mbart|bert2bert] [--out DIR] [--data-dir DIR] [--seed 0]
                                       [--steps N] [--force]

--kind mbart (the `mini` profile's): a 7.7M-parameter mBART-50 from scratch, about 15 min on two idle
cores. --kind bert2bert (`mini_warm`'s): warm-started from the installed all-MiniLM-L6-v2, about 23 min.
Both train on the English WikiNEuRal text in the data folder, once per machine: the build goes to the
user cache ($ACLM_CACHE, else ~/.cache/aclm) and --out links to it; an unchanged build is skipped, a
killed one resumes from its last checkpoint (one a minute) to the same weights. Prints the held-out
denoising loss and token accuracy. Details: docs/mini-profile.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools is no installed package: the checkout's

from aclm.base.logs import setup_logging
from aclm.run.cli import main_guard
from tools.pretraining import DEFAULT_OUT_DIRS, MODEL_NAMES, base_spec, pretrain_generator, user_cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=sorted(MODEL_NAMES), default="mbart",
                        help="mbart: a small mBART-50 from scratch; bert2bert: warm-started from MiniLM "
                             "(default: %(default)s)")
    parser.add_argument("--out", type=Path, help="output folder (default: models/mini for mbart, models/mini-warm "
                                                 "for bert2bert)")
    parser.add_argument("--data-dir", help="folder holding wikineural/<lang>/silver.conllu (default: $ACLM_DATA_DIR)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights, masks and data order")
    parser.add_argument("--steps", type=int, help="optimisation steps (default: the kind's spec: 1500 for mbart, "
                                                   "1000 for bert2bert)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the manifest matches")
    parser.add_argument("--no-cache", action="store_true",
                        help="build in --out itself, not in the user cache ($ACLM_CACHE, else ~/.cache/aclm) that "
                             "--out otherwise links to")
    args = parser.parse_args()
    setup_logging()

    out = args.out or DEFAULT_OUT_DIRS[args.kind]
    steps = args.steps if args.steps not in (None, base_spec(args.kind)["train"]["steps"]) else None
    manifest, rebuilt = pretrain_generator(out, args.data_dir, args.seed, {"train": {"steps": steps}} if steps else None,
                                           args.force, cache=None if args.no_cache else user_cache(), kind=args.kind)
    if not rebuilt:
        print(f"{out / MODEL_NAMES[args.kind]}: up to date")
        return
    print(json.dumps({k: manifest[k] for k in ("steps", "epochs", "train_loss", "resumed_from_step",
                                                "train_seconds", "wall_seconds", "heldout")}, indent=2))
    print(f"{manifest['model']['parameters']} parameters, vocabulary {manifest['model']['vocab_size']}: "
          f"{out / MODEL_NAMES[args.kind]}")


if __name__ == "__main__":
    main_guard(main)
