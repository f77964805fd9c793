"""How often a perfect copy, encoded and decoded by the real mBART-50 tokenizer, still equals its source.

    python tools/decoded_copies.py [--split dev] [--languages en zh ...]

Each sentence of MultiCoNER's ``<split>.conll`` is linearised with its label tokens, encoded as a target and
decoded back as S5 decodes (docs/languages.md).  Prints a Markdown table: the copies equal to their source
as written, as :func:`aclm.base.text.normal_form` sees them, and the sentences holding a piece the
vocabulary lacks (``<unk>``).  Needs ``make real-vocab-models``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from transformers import AutoTokenizer

from aclm.base.data import read_conll
from aclm.base.text import normal_form
from aclm.steps.generation import decode_keeping_labels
from aclm.steps.generator import language_code, set_language
from aclm.steps.labels import label_tokens, linearize, parse_generation
from aclm.steps.screening import MalformedGeneration
from tools.real_vocab import DEFAULT_OUT_DIR

TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
LANGUAGES = ["bn", "de", "en", "es", "hi", "ko", "nl", "ru", "tr", "zh"]


def labelled_tokenizer():
    """The real-vocabulary mBART-50 tokenizer with MultiCoNER's label tokens, as S4 leaves it."""
    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_OUT_DIR / "mbart-large-50")
    tokenizer.add_special_tokens({"additional_special_tokens": label_tokens(TYPES)},
                                 replace_additional_special_tokens=False)
    return tokenizer


def share(count: int, total: int) -> str:
    return f"{count} ({count / total:.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("ACLM_DATA_DIR", "data")),
                        help="the data folder holding multiconer/<language>/ ($ACLM_DATA_DIR)")
    parser.add_argument("--split", default="dev", help="which file of each language: dev, test, train_full ...")
    parser.add_argument("--languages", nargs="+", default=LANGUAGES)
    args = parser.parse_args()
    tokenizer = labelled_tokenizer()
    keep = set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES)))
    print("| language | sentences | copy equal as written | copy equal as normalised | with `<unk>` |")
    print("|---|---|---|---|---|")
    for language in args.languages:
        sentences = read_conll(args.data / "multiconer" / language / f"{args.split}.conll")
        set_language(tokenizer, language_code(tokenizer, language))
        written = normalised = unknown = 0
        for sentence in sentences:
            ids = tokenizer(text_target=" ".join(linearize(sentence.tokens, sentence.tags))).input_ids
            unknown += tokenizer.unk_token_id in ids
            try:       # decoded the released way (<unk> dropped): an entity of <unk> alone is an empty pair
                copy = parse_generation(decode_keeping_labels(tokenizer, ids, keep), TYPES)
            except MalformedGeneration:
                continue
            written += copy.tokens == sentence.tokens
            normalised += normal_form(copy.tokens) == normal_form(sentence.tokens)
        n = len(sentences)
        print(f"| {language} | {n} | {share(written, n)} | {share(normalised, n)} | {share(unknown, n)} |")


if __name__ == "__main__":
    main()
