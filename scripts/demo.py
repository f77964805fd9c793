#!/usr/bin/env python
"""Gold-only against ACLM on the bundled sample, offline, with the tiny models.

    make demo                      # = python scripts/demo.py
    python scripts/demo.py profile=tiny dataset=sample/de

Runs every ACLM stage (S0-S7) on data/sample/en with the random-weight tiny
models of scripts/build_tiny_models.py, then prints both F1 scores and a few
source -> template -> augmentation examples. The models are untrained, so the
numbers and the generated text say nothing about the method: the demo shows
that every stage runs, and what each one writes.
"""

from __future__ import annotations

import json
import logging

from aclm import experiment as ex
from aclm.cli import main_guard, parse, stage_parser
from aclm.config import load_config
from aclm.io import read_json, read_jsonl
from aclm.methods import run_method

EXAMPLES = 4


def show_examples(cfg) -> None:
    generations = read_jsonl(ex.method_dir(cfg) / "s5_generate" / "generations.jsonl")
    templates = read_jsonl(ex.method_dir(cfg) / "s3_templates" / "train.jsonl")
    def rank(g: dict) -> int:  # kept with an entity, kept without one (dropped in S6), malformed
        return 0 if g["status"] == "kept" and set(g["tags"]) != {"O"} else 1 if g["status"] == "kept" else 2

    shown = sorted(generations, key=rank)[:EXAMPLES]
    for g in shown:
        source = templates[g["source"]]
        print(f"\nsource     : {source['target']}")
        if g["partner"] is not None:
            print(f"mixed with : {templates[g['partner']]['target']}")
        print(f"template   : {g['template']}")
        print(f"generation : {g['generation']}")
        status = g["status"] if rank(g) != 1 else "parsed, but entity-free: dropped in S6"
        print(f"status     : {status}")


def main() -> None:
    args, _ = parse(stage_parser(__doc__), [])
    overrides = ["profile=tiny", *args.overrides] if args.overrides else ["profile=tiny"]
    logging.getLogger("flair").setLevel(logging.WARNING)
    results = {}
    for method in ("gold_only", "aclm"):
        cfg = load_config([*overrides, f"method={method}"])
        results[method] = read_json(run_method(cfg) / "result.json")
    report = results["aclm"]["augmentation"]
    print("\n=== ACLM on", cfg.dataset, "(tiny random models: the numbers measure nothing) ===")
    print(f"{'method':<10} {'F1':>6} {'P':>6} {'R':>6}  train sentences")
    for method, r in results.items():
        print(f"{method:<10} {r['f1']:6.2f} {r['precision']:6.2f} {r['recall']:6.2f}  {r['sizes']['train']}")
    print("\ngeneration:", json.dumps(report["generation"]))
    print("postprocess:", json.dumps(report["postprocess"]))
    show_examples(cfg)
    print(f"\nall artifacts: {ex.run_root(cfg)}")


if __name__ == "__main__":
    main_guard(main)
