"""What every augmentation method receives and returns.

A method gets a ``Gold`` (the setting's gold data and a scratch folder) and
returns rows for ``generations.jsonl``; a row it keeps is built by
``kept_row``.  A leaf module, so the methods (``baselines/``, ``melm/``) and
``aclm.run.chain``, which dispatches to them, can all import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aclm.base.data import TaggedSentence


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
    needs: dict[str, Path] = field(default_factory=dict)   # S6 of the methods it needs, where they ran


def kept_row(sentence: TaggedSentence, sources: list[int], **extra) -> dict:
    """A kept ``generations.jsonl`` row: the sentence and the gold sentences it came from."""
    return {"status": "kept", "tokens": sentence.tokens, "tags": sentence.tags, "sources": sources, **extra}
