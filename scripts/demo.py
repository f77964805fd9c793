#!/usr/bin/env python
"""Gold-only against ACLM with real pretrained weights, offline, on CPU.

    make demo                      # = python scripts/demo.py (profile mini, multiconer/en, 100 gold)
    python scripts/demo.py dataset=sample/en gold=full     # the bundled sample, without ../shared/data

The `mini` profile's tagger is the real all-MiniLM-L6-v2, fine-tuned on the gold
sample (S1): its F1 is a real Gold-only score, and its attention maps choose
the keywords of S2, shown here with their scores beside the candidates they
beat. The generator is the mini profile's small mBART-50, pretrained here by
denoising (make mini-generator): it writes words, but it is far from
mBART-50-large, and ACLM's F1 at this scale says little about the paper's.
"""

from __future__ import annotations

import json

from aclm.base.config import load_config
from aclm.base.data import bio_spans
from aclm.stages import layout, outputs
from aclm.run.chain import plan, run_to_result
from aclm.run.cli import main_guard, parse, stage_parser
from aclm.run.estimates import guesses, recorded_seconds, rest
from aclm.stages.data import dataset_files
from aclm.stages.layout import RunLayout
from aclm.run.naming import run_config

EXAMPLES = 6
#: the taggers' epochs here: the profile's 100 would train up to five times as long;
#: in its own run folder, so that the mini Table 1's converged runs are not retrained
DEMO_EPOCHS = 20
KEYWORD_EXAMPLES = 5


def own_words(g: dict) -> list[str]:
    """Words of a generation that its template did not hold: what the generator wrote itself."""
    template = set(g["template"].split())
    return [w for w in g.get("tokens", []) if w not in template]


def show_examples(cfg) -> None:
    """Kept augmentations with words of the generator's own first, then the rest; source, template, output."""
    run = RunLayout.of(cfg)
    generations = outputs.generations(run.stage(layout.S5))
    templates = outputs.template_rows(run.stage(layout.S3), "train")
    def rank(g: dict) -> int:  # kept with words of its own, kept, kept but entity-free (dropped in S6), malformed
        if g["status"] != "kept":
            return 3
        return 2 if set(g["tags"]) == {"O"} else 0 if own_words(g) else 1

    kept = [g for g in generations if rank(g) == 0]
    print(f"\nS5: {len(kept)} of {len(generations)} generations parse, hold an entity and add words of the "
          f"generator's own; {EXAMPLES} of them (the new words in [brackets]):")
    for g in sorted(generations, key=rank)[:EXAMPLES]:
        source = templates[g["source"]]
        print(f"\nsource     : {source['target']}")
        if g["partner"] is not None:
            print(f"mixed with : {templates[g['partner']]['target']}")
        print(f"template   : {g['template']}")
        print(f"generation : {g['generation']}")
        if rank(g) == 0:
            print(f"new words  : {' '.join(f'[{w}]' for w in own_words(g))}")
        status = {0: "kept", 1: "kept (every word from the template)", 2: "parsed, but entity-free: dropped in S6",
                  3: g["status"]}[rank(g)]
        print(f"status     : {status}")


def bracketed(tokens: list[str], tags: list[str]) -> str:
    """``[PER john smith] visited ...``"""
    words, spans = list(tokens), bio_spans(tags)
    for start, end, etype in reversed(spans):
        words[start:end] = [f"[{etype} {' '.join(tokens[start:end])}]"]
    return " ".join(words)


def show_keywords(cfg) -> None:
    """Sentences with the keywords the fine-tuned tagger's attention chose, and the candidates they beat."""
    run = RunLayout.of(cfg)
    rows = [r for r in outputs.keyword_rows(run.stage(layout.S2), "train") if r["keywords"]]
    templates = outputs.template_rows(run.stage(layout.S3), "train")
    by_tokens = {tuple(t["tokens"]): t["template"] for t in templates}
    print("\nS2: the words each sentence's entities attend to most (summed attention from the entities,\n"
          f"last 4 layers of the fine-tuned tagger); ACLM keeps these in its templates and masks the rest (p = "
          f"{cfg.keywords.p}):")
    for r in sorted(rows, key=lambda r: -len(r["scores"]))[:KEYWORD_EXAMPLES]:
        scores = {int(i): s for i, s in r["scores"].items()}
        kept = ", ".join(f"{r['tokens'][i]} ({scores[i]:.2f})" for i in r["keywords"])
        others = sorted((i for i in scores if i not in r["keywords"]), key=lambda i: -scores[i])
        beaten = ", ".join(f"{r['tokens'][i]} ({scores[i]:.2f})" for i in others[:4]) or "-"
        print(f"\nsentence : {bracketed(r['tokens'], r['tags'])}")
        print(f"keywords : {kept}")
        print(f"not kept : {beaten}")
        print(f"template : {by_tokens[tuple(r['tokens'])]}")


def expected(overrides: list[str]) -> str:
    """How long the demo should take here: the stages not yet current of both methods' chains (shared ones
    once), each counted from this demo's earlier runs, else the profile's measured run of this recipe."""
    todo: dict[str, float | None] = {}
    for method in ("gold_only", "aclm"):
        cfg = run_config([*overrides, f"method={method}"])
        todo.update({name: recorded_seconds(cfg, name) for name, state in plan(cfg) if state != "current"})
    return rest(guesses(cfg, todo)) if todo else "nothing to run: every stage is current"


def main() -> None:
    args, _ = parse(stage_parser(__doc__))
    overrides = ["profile=mini", "gold=100", f"ner.epochs={DEMO_EPOCHS}", "run_dir=runs/demo", *args.overrides]
    missing = [p for p in dataset_files(load_config(overrides)) if not p.exists()]
    if missing and not any(o.startswith("dataset=") for o in args.overrides):
        print(f"{missing[0]} not found (set ACLM_DATA_DIR to the data folder): using the bundled sample instead")
        overrides += ["dataset=sample/en", "gold=full"]
    print(f"expected: {expected(overrides)}", flush=True)
    results = {}
    for method in ("gold_only", "aclm"):
        cfg = run_config([*overrides, f"method={method}"])
        results[method] = outputs.result(run_to_result(cfg))
    report = results["aclm"]["augmentation"]
    print(f"\n=== {cfg.dataset}, {results['gold_only']['sizes']['train']} gold sentences, profile {cfg.profile} ===")
    print(f"tagger: {cfg.ner.model} (real pretrained weights); generator: {cfg.generator.model}")
    print(f"{'method':<10} {'F1':>6} {'P':>6} {'R':>6}  train sentences")
    for method, r in results.items():
        print(f"{method:<10} {r['f1']:6.2f} {r['precision']:6.2f} {r['recall']:6.2f}  {r['sizes']['train']}")
    recipe = load_config([o for o in overrides if not o.startswith("ner.epochs=")])  # the profile's own epochs
    if cfg.ner.epochs < recipe.ner.epochs:
        print(f"(both taggers trained {cfg.ner.epochs} epochs, far from converged: the gap between them is mostly "
              "ACLM's extra updates; docs/RESULTS.md has the converged miniature Table 1)")
    if "tiny" in cfg.generator.model:
        print("(the generator has random weights: ACLM's augmentations, and its F1, mean nothing yet)")
    show_keywords(cfg)
    print("\nS5 generation:", json.dumps(report["generation"]))
    print("S6 postprocess:", json.dumps(report["postprocess"]))
    show_examples(cfg)
    print(f"\nall artifacts: {RunLayout.of(cfg).root}")


if __name__ == "__main__":
    main_guard(main)
