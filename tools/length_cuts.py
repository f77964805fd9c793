"""What the generator's length limits cut in each language, counted with the real mBART-50 vocabulary.

    python tools/length_cuts.py [--split train_full] [--limit 100] [--languages en zh ...]

For each MultiCoNER language, every sentence is linearised with its label tokens as S4's target (the
language code, the pieces, ``</s>``).  Prints a Markdown table: the median and 95th percentile length, the
targets longer than ``--limit`` (S4 cuts them at ``generator.max_length``; S5 cannot write them at
``generation.max_length``), and the same for a mixner output, two sentences joined (each sentence with the
next one in the file, as a stand-in for its nearest neighbour: :mod:`aclm.steps.lengths`).  Needs ``make real-vocab-models``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from statistics import median, quantiles

from aclm.base.data import read_conll
from aclm.steps.lengths import mixed_lengths, target_lengths
from tools.decoded_copies import LANGUAGES, labelled_tokenizer, share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("ACLM_DATA_DIR", "data")),
                        help="the data folder holding multiconer/<language>/ ($ACLM_DATA_DIR)")
    parser.add_argument("--split", default="train_full", help="which file of each language")
    parser.add_argument("--limit", type=int, default=100, help="the length limit (the paper's: 100)")
    parser.add_argument("--languages", nargs="+", default=LANGUAGES)
    args = parser.parse_args()
    tokenizer = labelled_tokenizer()
    print(f"| language | sentences | median | 95th pct | targets over {args.limit} | mixed over {args.limit} |")
    print("|---|---|---|---|---|---|")
    for language in args.languages:
        sentences = read_conll(args.data / "multiconer" / language / f"{args.split}.conll")
        lengths = target_lengths(tokenizer, sentences, language)
        mixed = mixed_lengths(lengths)
        n = len(lengths)
        print(f"| {language} | {n} | {median(lengths):g} | {quantiles(lengths, n=20)[-1]:g} "
              f"| {share(sum(x > args.limit for x in lengths), n)} "
              f"| {share(sum(x > args.limit for x in mixed), len(mixed))} |")


if __name__ == "__main__":
    main()
