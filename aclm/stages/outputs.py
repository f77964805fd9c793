"""The one reader of each stage's output (and of the facts in its stamp).

What is in a file is known only to the stage that writes it and to its reader here, which every later stage,
script and table goes through; where files are is :mod:`aclm.stages.layout`.
"""

from __future__ import annotations

from pathlib import Path

from aclm.base.augmentation import GenerationRow
from aclm.base.data import TaggedSentence, read_conll
from aclm.base.io import read_json, read_jsonl
from aclm.engine import stamp
from aclm.stages import layout


def facts(stage: Path) -> dict:
    """The facts a finished stage's build returned (counts, types, timings), as its stamp keeps them."""
    return stamp(stage)["facts"]


# --- S0: the gold sample (data/) -----------------------------------------------------------


def gold(data: Path, split: str) -> list[TaggedSentence]:
    """The gold sentences of ``split`` (train or dev)."""
    return read_conll(data / layout.gold_file(split))


def sentence_languages(data: Path, split: str) -> list[str]:
    """The language of every gold sentence of ``split`` (several in the multilingual setting)."""
    return read_json(data / layout.LANGUAGES)[split]


def gold_size(data: Path) -> int:
    """How many gold training sentences the setting holds (a stratified draw of N may hold a few fewer)."""
    return facts(data)["train"]


def entity_types(data: Path) -> list[str]:
    """The setting's label set, as the data stage derived it from the gold sample."""
    return facts(data)["types"]


# --- S1, S7: a tagger -------------------------------------------------------------------------

def tagger_model(tagger: Path) -> Path:
    """The trained tagger's file (flair's ``best-model.pt``; gone once pruned)."""
    return tagger / layout.MODEL


def tagger_facts(tagger: Path) -> dict:
    """What training recorded: sentences (train, dev), dev F1, entity types and the training's figures."""
    return facts(tagger)


# --- S2, S3: keywords and templates ----------------------------------------------------------

def keyword_rows(s2: Path, split: str) -> list[dict]:
    """S2's rows: tokens, tags, keywords (word indices), attention scores and status."""
    return read_jsonl(s2 / layout.rows_file(split))


def template_rows(s3: Path, split: str) -> list[dict]:
    """S3's rows: tokens, tags, keywords, pieces (the skeleton), target, template and an example."""
    return read_jsonl(s3 / layout.rows_file(split))


# --- S5 or a baseline's augment stage: generations ----------------------------------------------

def generations(stage: Path) -> list[GenerationRow]:
    """Every row a generation stage wrote (kept or not), in order."""
    return read_jsonl(stage / layout.GENERATIONS)


def generation_facts(stage: Path) -> dict:
    """A generation stage's counts (the screening keys, and what the method adds)."""
    return facts(stage)


# --- S6: augmentations ------------------------------------------------------------------------

def augmentations(s6: Path) -> list[TaggedSentence]:
    """The augmentations S6 kept (``aug.conll``; empty when it kept none)."""
    return read_conll(s6 / layout.AUG, allow_empty=True)


def gold_and_augmentations(s6: Path) -> list[TaggedSentence]:
    """S7's training data: the gold sentences, then the augmentations (``gold+aug.conll``)."""
    return read_conll(s6 / layout.GOLD_AUG)


def augmentation_report(s6: Path) -> dict:
    """S6's ``report.json``: generation counts, drops by reason, gold, added, diversity."""
    return read_json(s6 / layout.REPORT)


# --- scores -----------------------------------------------------------------------------------

def result(scores: Path) -> dict:
    """A scoring stage's ``result.json`` (s1_eval or s7_eval)."""
    return read_json(scores / layout.RESULT)
