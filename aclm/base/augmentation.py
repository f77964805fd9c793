"""What every augmentation method receives (``Gold``) and returns (``generations.jsonl`` rows, as S5's).

A leaf module, so methods, steps and stages can all import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TypedDict

from aclm.base.data import TaggedSentence
from aclm.base.runtime import RunError


class NoAugmentation(RunError):
    """A method's post-processing kept nothing: its tagger would be Gold-only's, reported under its name."""


@dataclass
class Gold:
    """What a baseline gets: the setting's gold data and where to put scratch files."""

    train: list[TaggedSentence]
    dev: list[TaggedSentence]
    types: list[str]
    language: str                        # the dataset's ("multi" for a union)
    languages: list[str]                 # each train sentence's
    dev_languages: list[str]             # each dev sentence's
    device: object
    work_dir: Path
    needs: dict[str, dict] = field(default_factory=dict)   # the S6 report of each method it needs that ran


class _Screened(TypedDict):
    status: str                          # "kept", or why it was dropped (aclm.steps.screening.STATUSES)
    sources: list[int]                   # the training sentences it came from (none: generated from scratch)


class GenerationRow(_Screened, total=False):
    """One row of ``generations.jsonl``.  S6 reads ``status`` and, of a kept row, ``tokens``, ``tags`` and
    ``sources``; the other keys trace a row back to what made it, each method its own."""

    tokens: list[str]                    # a kept row's sentence
    tags: list[str]
    source: int                          # ACLM's S5: the template's training sentence,
    round: int                           # ... the round (also LwTR and MELM),
    partner: Optional[int]               # ... mixner's partner sentence,
    template: str                        # ... the template and
    generation: str                      # ... the decoded text
    code_mixed: bool                     # MELM: the seed was code-mixed
    sample_index: int                    # MulDA: the sample it was read from
    silver_index: int                    # WikiNEuRal: the silver sentence


def kept_row(sentence: TaggedSentence, sources: list[int], **extra) -> GenerationRow:
    """A kept ``generations.jsonl`` row: the sentence and the gold sentences it came from."""
    return {"status": "kept", "tokens": sentence.tokens, "tags": sentence.tags, "sources": sources, **extra}
