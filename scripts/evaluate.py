#!/usr/bin/env python
"""Score NER output with seqeval (conlleval semantics): micro P/R/F1, F1 per type, F1 by length.

    # compare two CoNLL files (same sentences, same tokens), e.g. gold and a system's output
    python scripts/evaluate.py --gold test.conll --pred system.conll [--json scores.json]
    # a 3-column file token<TAB>gold<TAB>predicted (what train_ner.py writes under predictions/)
    python scripts/evaluate.py --pred runs/.../s1_ner/predictions/multiconer_en.conll
    # a trained flair model on the setting's test set(s)
    python scripts/evaluate.py --model runs/.../s1_ner/best-model.pt profile=tiny dataset=multiconer/en
"""

from __future__ import annotations

from pathlib import Path

from aclm.cli import main_guard, parse, stage_parser
from aclm.data import DataError, read_conll, split_columns
from aclm.io import write_json
from aclm.metrics import evaluate_tags, format_scores


def read_columns(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Gold and predicted tags from a token<TAB>gold<TAB>pred file."""
    gold, pred, g, p = [], [], [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            if g:
                gold.append(g), pred.append(p)
            g, p = [], []
            continue
        cols = split_columns(line.strip())
        if len(cols) != 3:
            raise DataError(f"{path}:{lineno}: expected token, gold and predicted tag, found {len(cols)} columns")
        g.append(cols[1]), p.append(cols[2])
    if g:
        gold.append(g), pred.append(p)
    return gold, pred


def compare_files(gold_file: Path, pred_file: Path) -> dict:
    gold, pred = read_conll(gold_file), read_conll(pred_file)
    if len(gold) != len(pred):
        raise DataError(f"{pred_file}: {len(pred)} sentences, but {gold_file} has {len(gold)}")
    for g, p in zip(gold, pred):
        if g.tokens != p.tokens:
            raise DataError(f"{p.meta['source']}: tokens differ from {g.meta['source']}")
    return evaluate_tags([s.tags for s in gold], [s.tags for s in pred])


def main() -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--gold", type=Path, help="gold CoNLL file")
    parser.add_argument("--pred", type=Path, help="predicted CoNLL file (or a 3-column file without --gold)")
    parser.add_argument("--model", type=Path, help="a flair model to run on the configured test set(s)")
    parser.add_argument("--json", type=Path, help="also write the scores here")
    args, cfg = parse(parser)
    if args.model:
        from aclm.datasets import load_split
        from aclm.experiment import evaluate_on, test_names
        from aclm.ner import load_tagger
        from aclm.runtime import select_device

        select_device(cfg.device)
        tagger = load_tagger(args.model)
        scores = {name: evaluate_on(tagger, load_split(name, "test", cfg.data_dir), cfg.ner.eval_batch_size,
                                    None)[0] for name in test_names(cfg)}
    elif args.gold and args.pred:
        scores = {str(args.pred): compare_files(args.gold, args.pred)}
    elif args.pred:
        scores = {str(args.pred): evaluate_tags(*read_columns(args.pred))}
    else:
        parser.error("give --gold and --pred, a 3-column --pred, or --model")
    for name, s in scores.items():
        print(format_scores(s, title=name))
    if args.json:
        write_json(args.json, scores)


if __name__ == "__main__":
    main_guard(main)
