#!/usr/bin/env python
"""Tag a file with a trained tagger (S1's Gold-only model, or a method's S7), writing CoNLL.

    # the S7 tagger a `make run` keeps, on any CoNLL file (its tag column, if any, is ignored)
    python scripts/predict.py --model runs/mini/multiconer/en/gold100/seed1/aclm/s7_ner --input test.conll \\
        --output tagged.conll
    # plain text: one sentence a line, words split at white space
    python scripts/predict.py --model runs/.../s1_ner/best-model.pt --input sentences.txt --output tagged.conll

--model takes the model file, its stage folder (s1_ner, s7_ner) or a method's folder.  The output
has one `word<TAB>predicted tag` line per word and a blank line after each sentence; score it against
gold tags with `scripts/evaluate.py --gold GOLD --pred OUTPUT`.
"""

from __future__ import annotations

import argparse
import time
from itertools import groupby
from pathlib import Path

from aclm.base.data import DataError, TaggedSentence, format_conll, read_conll, read_text_lines, split_columns
from aclm.base.io import atomic_write_text
from aclm.base.logs import setup_logging
from aclm.base.runtime import select_device
from aclm.stages import layout
from aclm.run.cli import main_guard
from aclm.engine.stages import pruned_files


def model_file(path: Path) -> Path:
    """The tagger's file from what the user gave: the file, its stage folder, or a method's folder."""
    for candidate in (path, path / layout.MODEL, path / layout.S7 / layout.MODEL, path / layout.S1 / layout.MODEL):
        if candidate.is_file():
            return candidate
    for stage_dir in (path, path / layout.S7, path / layout.S1):
        if layout.MODEL in pruned_files(stage_dir):
            raise FileNotFoundError(f"{stage_dir / layout.MODEL} was pruned once its run was scored (grid runs "
                                    f"keep no final tagger); rerun it with storage.keep_final_tagger=true --force")
    raise FileNotFoundError(f"no tagger at {path}: give best-model.pt, an s1_ner/s7_ner folder or a method folder")


def read_input(path: Path) -> list[TaggedSentence]:
    """CoNLL (any layout the project reads; tags ignored), a one-column token file, or plain text."""
    lines = read_text_lines(path)
    first = next((line for line in lines if line.strip() and not line.startswith(("# id", "-DOCSTART-"))), "")
    if len(split_columns(first.strip())) >= 2 and path.suffix != ".txt":
        return read_conll(path)
    if path.suffix == ".txt":
        words = [line.split() for line in lines]
        return [TaggedSentence(w, ["O"] * len(w), {"source": f"{path}:{n}"})
                for n, w in enumerate(words, start=1) if w]
    blocks = [list(words) for filled, words in groupby(map(str.strip, lines), key=bool) if filled]
    return [TaggedSentence(words, ["O"] * len(words)) for words in blocks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="best-model.pt, its stage folder or a method's")
    parser.add_argument("--input", type=Path, required=True, help="a CoNLL file, a token-per-line file or a .txt")
    parser.add_argument("--output", type=Path, required=True, help="where the tagged CoNLL goes")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    args = parser.parse_args()
    setup_logging()
    model = model_file(args.model)
    sentences = read_input(args.input)
    if not sentences:
        raise DataError(f"{args.input}: no sentences to tag")
    from aclm.steps.ner import load_tagger, predict_tags

    select_device(args.device)
    start = time.perf_counter()
    predicted = predict_tags(load_tagger(model), sentences, args.batch_size, progress=True)
    tagged = [TaggedSentence(s.tokens, tags) for s, tags in zip(sentences, predicted)]
    atomic_write_text(args.output, format_conll(tagged))
    print(f"tagged {len(tagged)} sentences ({sum(map(len, tagged))} words) in {time.perf_counter() - start:.1f} s "
          f"with {model}: {args.output}")


if __name__ == "__main__":
    main_guard(main)
