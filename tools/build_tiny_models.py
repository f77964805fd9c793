#!/usr/bin/env python
"""Build tiny random-weight versions of the models the paper uses, offline.

    python tools/build_tiny_models.py [--out models/tiny] [--text FILE_OR_DIR ...] [--seed 0] [--force]
    python tools/build_tiny_models.py --shape paper      # full-size stand-ins in models/paper_shape (6.9 GB)

XLM-RoBERTa, mBART-50, Sentence-BERT and GPT-2 with the real architectures, tokenizer classes and special
tokens, so the demo, the tests and CI run the real code paths on CPU in seconds; ``--shape paper`` builds
them at the paper's sizes for cost measurements (``make bench-paper-shape``). Tokenizers are trained on
data/sample/*/*.conll plus any --text; same seed and text give byte-identical folders, and an unchanged
build is skipped ("up to date"). Details: docs/cost.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools is no installed package: the checkout's

from aclm.base.paths import PROJECT_ROOT
from tools.tiny_models import DEFAULT_OUT_DIR, DEFAULT_TEXT_DIR, SHAPES, build_tiny_models
from aclm.run.cli import main_guard

OUT_DIRS = {"tiny": DEFAULT_OUT_DIR, "paper": PROJECT_ROOT / "models" / "paper_shape"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny",
                        help="tiny, or paper: the paper's model sizes (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="output folder (default: models/tiny or models/paper_shape)")
    parser.add_argument("--text", type=Path, nargs="+", action="extend", default=[], metavar="FILE_OR_DIR",
                        help="more tokenizer training text: *.conll files, folders of them, "
                             "or plain text files with one sentence per line")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the manifest matches")
    args = parser.parse_args()

    args.out = args.out or OUT_DIRS[args.shape]
    start = time.perf_counter()
    manifest, rebuilt = build_tiny_models(args.out, [DEFAULT_TEXT_DIR, *args.text], args.seed, args.force,
                                          args.shape)
    if not rebuilt:
        print(f"{args.out}: up to date")
        return
    for name, info in manifest["models"].items():
        print(f"{name:16s} vocab {info['vocab_size']:5d}  parameters {info['parameters']:11,d}  "
              f"{info['bytes'] / 1e6:9.1f} MB  {args.out / name}")
    print(f"built from {manifest['sentences']} sentences in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main_guard(main)
