#!/usr/bin/env python
"""Score NER output with seqeval (conlleval semantics, or --strict IOB2): micro and per-type P/R/F1 with
support, and P/R/F1 by sentence length.  The tags are checked as a run's data are (aclm/run/datacheck.py):
a lower-case tag fails (exit 1); a gold type in fewer than data_check.min_type_sentences sentences (a
misspelt B-PRE?) and a predicted type the gold data lacks are warnings.

    # compare two CoNLL files (same sentences, same tokens), e.g. gold and a system's output
    python scripts/evaluate.py --gold test.conll --pred system.conll [--json scores.json]
    # a 3-column file token<TAB>gold<TAB>predicted (what ner.py writes under predictions/)
    python scripts/evaluate.py --pred runs/.../s1_eval/predictions/multiconer_en.conll
    # a trained flair model on the setting's test set(s)
    python scripts/evaluate.py --model runs/.../s1_ner/best-model.pt profile=tiny dataset=multiconer/en
"""

from __future__ import annotations

from pathlib import Path

from aclm.base.data import (DataError, TaggedSentence, entity_types, first_mentions, read_conll, read_text_lines,
                            split_columns, tagged_sentence, tags_as_written)
from aclm.base.io import write_json
from aclm.base.metrics import evaluate_tags, format_scores
from aclm.run.cli import main_guard, parse, stage_parser
from aclm.run.datacheck import Report, rare_types, tag_problems


def read_columns(path: Path) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    """Gold and predicted sentences from a token<TAB>gold<TAB>pred file."""
    gold, pred, rows = [], [], []
    for lineno, line in enumerate([*read_text_lines(path), ""], start=1):
        if line.strip():
            cols = split_columns(line.strip())
            if len(cols) != 3:
                raise DataError(f"{path}:{lineno}: expected token, gold and predicted tag, found {len(cols)} columns")
            rows.append((lineno, *cols))
        elif rows:
            lines, tokens, gold_tags, pred_tags = zip(*rows)
            gold.append(tagged_sentence(tokens, gold_tags, path, lines))
            pred.append(tagged_sentence(tokens, pred_tags, path, lines))
            rows = []
    return gold, pred


def aligned(gold_file: Path, pred_file: Path) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    gold, pred = read_conll(gold_file), read_conll(pred_file)
    if len(gold) != len(pred):
        raise DataError(f"{pred_file}: {len(pred)} sentences, but {gold_file} has {len(gold)}")
    for g, p in zip(gold, pred):
        if g.tokens != p.tokens:
            raise DataError(f"{p.meta['source']}: tokens differ from {g.meta['source']}")
    return gold, pred


def check(gold: list[TaggedSentence], pred: list[TaggedSentence], cfg) -> Report:
    """The run's data check on both sides: a lower-case tag fails; a gold type in fewer than
    ``data_check.min_type_sentences`` sentences and a predicted type the gold data never has (it can only
    add false positives) are warnings, since a small file may rightly hold a type once."""
    report = Report()
    for sentences in (gold, pred):
        errors, warnings = tag_problems(sentences, cfg.data_check.canonical_tags)
        report.errors += errors
        report.warnings += warnings
    report.warnings += rare_types(gold, cfg.data_check.min_type_sentences)
    gold_types = entity_types(gold)
    for etype, where in sorted(first_mentions(pred).items()):
        if etype not in gold_types:
            report.warnings.append(f"{where}: predicted type {etype!r} does not occur in the gold data")
    return report


def score(gold: list[TaggedSentence], pred: list[TaggedSentence], cfg, strict: bool) -> dict:
    report = check(gold, pred, cfg)
    for message in report.warnings:
        print(f"warning: {message}")
    report.raise_errors()
    predicted = [tags_as_written(s) if strict else s.tags for s in pred]   # strict: an I- opening an entity is none
    return evaluate_tags([s.tags for s in gold], predicted, strict=strict)


def main() -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--gold", type=Path, help="gold CoNLL file")
    parser.add_argument("--pred", type=Path, help="predicted CoNLL file (or a 3-column file without --gold)")
    parser.add_argument("--model", type=Path, help="a flair model to run on the configured test set(s)")
    parser.add_argument("--strict", action="store_true",
                        help="seqeval's strict mode (IOB2): an entity must open with B- to count")
    parser.add_argument("--json", type=Path, help="also write the scores here")
    args, cfg = parse(parser)
    if args.model:
        from aclm.base.datasets import load_split
        from aclm.base.runtime import select_device
        from aclm.stages.scores import test_names
        from aclm.steps.ner import load_tagger, predict_tags

        select_device(cfg.device)
        tagger = load_tagger(args.model)
        scores = {}
        for name in test_names(cfg):
            gold = load_split(name, "test", cfg.data_dir)
            tags = predict_tags(tagger, gold, cfg.ner.eval_batch_size, progress=True)
            pred = [TaggedSentence(s.tokens, t, {"source": s.meta.get("source", "?")}) for s, t in zip(gold, tags)]
            scores[name] = score(gold, pred, cfg, args.strict)
    elif args.gold and args.pred:
        scores = {str(args.pred): score(*aligned(args.gold, args.pred), cfg, args.strict)}
    elif args.pred:
        scores = {str(args.pred): score(*read_columns(args.pred), cfg, args.strict)}
    else:
        parser.error("give --gold and --pred, a 3-column --pred, or --model")
    for name, s in scores.items():
        print(format_scores(s, title=name + (" (strict IOB2)" if args.strict else "")))
    if args.json:
        write_json(args.json, scores)


if __name__ == "__main__":
    main_guard(main)
