#!/usr/bin/env python
"""Pretrain a small generator with mBART's denoising objective, offline: a generator that knows language.

    make mini-generator          # = python tools/pretrain_generator.py --out models/mini
    make warm-generator          # = python tools/pretrain_generator.py --kind bert2bert --out models/mini-warm
    python tools/pretrain_generator.py [--kind mbart|bert2bert] [--out DIR] [--data-dir DIR] [--seed 0]
                                       [--steps N] [--force]

``--kind bert2bert`` builds the `mini_warm` profile's generator instead: an
encoder-decoder warm-started from the installed all-MiniLM-L6-v2 (BERT) and
trained on the same text with the same objective (tools/warm_start.py says
what and why; docs/mini-profile.md has its figures). What follows is the
default, ``--kind mbart``.

The `mini` profile's generator (ACLM S4/S5, MulDA). No pretrained seq2seq model
installs here without a model hub, so one is made (tools/pretraining.py):

- model: MBartForConditionalGeneration, d_model 256, 3 encoder + 3 decoder
  layers, 4 heads, feed-forward 1024, 7.7M parameters (fairseq's init scale,
  both position tables starting from one sinusoidal table); tokenizer:
  MBart50TokenizerFast (the 52 language codes, <mask>) over its own 8k-piece
  SentencePiece vocabulary trained on the text;
- text: the words of the English WikiNEuRal silver data in ../shared/data (no
  tags; the mini profile is English), LOWER-CASED (MultiCoNER is),
  deduplicated, sentences of at most 64 words, every sentence that also occurs
  in a MultiCoNER en file left out; 1% held out (115 sentences);
- objective: mBART's text infilling: 35% of each sentence's words masked in
  spans of Poisson(3.5) length, one <mask> per span, the language code on the
  source and the target, the target the whole sentence; Seq2SeqTrainer, AdamW
  1.5e-3 (100 warm-up steps, linear decay), batch 32, no dropout, 1500 steps
  (4.2 passes over the 11,410 training sentences); the saved config has
  mBART's dropout 0.1 for fine-tuning;
- budget: 1500 steps. Measured: 877 s wall (14.6 min) for the whole build on
  two idle cores. Held-out: denoising loss 2.15, teacher-forced token
  accuracy 0.671.

A bar shows the steps done, the total and the time left, and a line every 50
steps sums up (loss, learning rate, seconds per step, time left). The build
goes to the user cache (``$ACLM_CACHE``, else ``~/.cache/aclm``), under its
fingerprint of its inputs and code, and --out becomes a link to it: a second clone, or CI on
the same machine, reuses it (``--no-cache`` builds in --out). A build with
unchanged inputs and code is skipped; a killed build (Ctrl-C, SIGTERM) resumes from its
last checkpoint (``.work`` in the build's folder, one a minute:
``CHECKPOINT_SECONDS``) to the very weights of a build never stopped. The same seed
gives the same weights on the same hardware.
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
