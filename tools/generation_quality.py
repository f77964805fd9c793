#!/usr/bin/env python
"""How good is the generator inside a method? Shares of its generations, read from a run's files.

    python tools/generation_quality.py method=aclm profile=mini gold=100 seed=1 [data_dir=... run_dir=...]
    python tools/generation_quality.py method=mulda profile=mini gold=100 seed=1 --json quality.json

Runs the method's stages up to S6 (each skipped when current), then reads the generations and S6's report.
ACLM, as shares of all S5 generations:
  well_formed     parses back (S5 status "kept")
  keeps_entities  well formed, with every source entity (words and type)
  keeps_template  well formed, with every template entity, the mixner partner's too
  not_copy        well formed, its words not those of the source (or partner)
  new_word        well formed, with a word in neither the template nor a label
  usable          keeps_entities and not_copy
the counts by group (plain or mixed rounds; longest entity under or at least LONG_ENTITY words), and
Diversity-E/N/L of what S6 kept. DAGA and MulDA have no source: their shares (finished, well_formed,
not_copy of a training sentence, kept) come from their generation stage's screening counts.
Results: docs/RESULTS.md.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from aclm.base.augmentation import GenerationRow
from aclm.base.data import TaggedSentence
from aclm.stages import layout, outputs
from aclm.run.chain import run_method
from aclm.run.cli import main_guard, parse, stage_parser
from aclm.stages.layout import RunLayout
from aclm.steps.postprocess import too_similar

EXAMPLES = 5
#: Entities of this many words or more make a template's "long_entities" group.
LONG_ENTITY = 3


def entities(sentence: TaggedSentence) -> Counter:
    """A sentence's entities as a multiset of (words, type)."""
    return Counter((tuple(sentence.tokens[a:b]), etype) for a, b, etype in sentence.spans())


def tagged(row: dict) -> TaggedSentence:
    return TaggedSentence(row["tokens"], row["tags"])


def groups(templates: list[TaggedSentence]) -> tuple[str, str]:
    """A generation's round kind and its template's entity length (the docstring's groups)."""
    longest = max((b - a for s in templates for a, b, _ in s.spans()), default=0)
    return "mixed" if len(templates) > 1 else "plain", "long_entities" if longest >= LONG_ENTITY else "short_entities"


def aclm_shares(rows: list[GenerationRow], sources: list[dict]) -> tuple[dict, list[dict]]:
    """The shares of the docstring over S5's rows; ``sources`` are S3's train rows (tokens, tags)."""
    counts = Counter()
    by_group: dict[str, Counter] = {}
    examples = []
    for row in rows:
        src = sources[row["source"]]
        partner = sources[row["partner"]] if row.get("partner") is not None else None
        templates = [tagged(s) for s in (src, partner) if s]
        mine = [by_group.setdefault(g, Counter()) for g in groups(templates)]
        for counter in (counts, *mine):
            counter["generated"] += 1
        if row["status"] != "kept":
            counts[f"status_{row['status'].split(':')[0]}"] += 1
            continue
        got = entities(tagged(row))
        keeps, copy = not (entities(templates[0]) - got), too_similar(tagged(row), templates, 1.0)
        template_words = set(row["template"].split())
        counts.update(well_formed=1, keeps_entities=keeps,
                      keeps_template=not (sum(map(entities, templates), Counter()) - got), not_copy=not copy,
                      new_word=any(w not in template_words for w in row["tokens"]), usable=keeps and not copy)
        for group in mine:
            group.update(well_formed=1, not_copy=int(not copy), usable=int(keeps and not copy))
        if keeps and not copy and len(examples) < EXAMPLES:
            examples.append({"source": " ".join(src["tokens"]),
                             "partner": " ".join(partner["tokens"]) if partner else None,
                             "template": row["template"], "generation": row["generation"]})
    n = counts["generated"]
    shares = {k: round(counts[k] / n, 4) for k in ("well_formed", "keeps_entities", "keeps_template", "not_copy",
                                                   "new_word", "usable")} if n else {}
    return {"counts": dict(counts), "shares": shares,
            "by_group": {g: dict(c) for g, c in sorted(by_group.items())}}, examples


def scratch_shares(facts: dict) -> dict:
    """DAGA/MulDA: shares of the generated samples from their stage's screening counts."""
    n = facts.get("generated", 0)
    if not n:
        return {"counts": facts, "shares": {}}
    well_formed = n - sum(v for k, v in facts.items() if k.startswith("malformed_"))
    not_copy = well_formed - facts.get("copy", 0)
    return {"counts": facts, "shares": {"finished": round(1 - facts.get("malformed_truncated", 0) / n, 4),
                                        "well_formed": round(well_formed / n, 4),
                                        "not_copy": round(not_copy / n, 4),
                                        "kept": round(facts.get("kept", 0) / n, 4)}}


def quality(method_dir: Path) -> dict:
    s5 = method_dir / layout.S5
    report = outputs.augmentation_report(method_dir / layout.S6)
    if s5.exists():
        out, examples = aclm_shares(outputs.generations(s5), outputs.template_rows(method_dir / layout.S3, "train"))
    else:
        out, examples = scratch_shares(outputs.generation_facts(method_dir / layout.AUGMENT)), []
    return {"method_dir": str(method_dir), **out, "s6_added": report["added"], "diversity": report["diversity"],
            "examples": examples}


def main() -> None:
    parser = stage_parser(__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--no-run", action="store_true", help="only read the run's files; run no stage")
    args, cfg = parse(parser)
    if not args.no_run:
        run_method(cfg, until=layout.S6)
    result = {"generator": cfg.generator.model, **quality(RunLayout.of(cfg).method_dir)}
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main_guard(main)
