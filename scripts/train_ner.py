#!/usr/bin/env python
"""Train and evaluate the NER tagger for one setting (S1, or S7 after augmentation).

    python scripts/train_ner.py profile=tiny dataset=multiconer/en gold=100 seed=1
    python scripts/train_ner.py profile=tiny method=aclm ...     # S7 on gold + ACLM's augmentations
    python scripts/train_ner.py ner.tagger=bilstm_crf ...        # WikiNEuRal's BiLSTM-CRF tagger

With method=gold_only (the default) it cuts the gold sample (S0) and trains the
gold model (S1), which is also the Gold-only baseline. With any other method it
trains on <run>/<method>/s6_postprocess/gold+aug.conll. Either way the model is
evaluated on the test set(s) and a result.json is written beside it.
"""

from __future__ import annotations

from aclm.cli import main_guard, parse, stage_parser
from aclm.experiment import s1_stage, s7_stage


def main() -> None:
    args, cfg = parse(stage_parser(__doc__))
    out = s1_stage(cfg, force=args.force) if cfg.method == "gold_only" else s7_stage(cfg, force=args.force)
    print(f"result: {out / 'result.json'}")


if __name__ == "__main__":
    main_guard(main)
