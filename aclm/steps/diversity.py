"""Diversity of augmentations against their source sentences (ACLM Table 3).

Diversity-E: mean share (percent) of an augmentation's entity tokens, with repetition, found nowhere in its
source, over augmentations with entity tokens; Diversity-N: the same for ``O`` tokens; Diversity-L: mean
``|len(aug) - len(source)|``. No pair to average: None (always so for DAGA and MulDA: no source).
"""

from __future__ import annotations

from statistics import fmean
from typing import Sequence

from aclm.base.data import TaggedSentence


def _novelty(words: list[str], source_words: set[str]) -> float | None:
    if not words:
        return None
    return sum(w not in source_words for w in words) / len(words)


def _percent_mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return 100.0 * fmean(present) if present else None


def diversity(pairs: Sequence[tuple[TaggedSentence, TaggedSentence]]) -> dict[str, float | None]:
    """``diversity_e``, ``diversity_n`` (percent) and ``diversity_l`` (tokens) of (source, augmentation) pairs."""
    entity, other, lengths = [], [], []
    for source, augmentation in pairs:
        source_words = set(source.tokens)
        tagged = list(zip(augmentation.tokens, augmentation.tags))
        entity.append(_novelty([w for w, t in tagged if t != "O"], source_words))
        other.append(_novelty([w for w, t in tagged if t == "O"], source_words))
        lengths.append(abs(len(augmentation) - len(source)))
    return {"diversity_e": _percent_mean(entity),
            "diversity_n": _percent_mean(other),
            "diversity_l": fmean(lengths) if lengths else None}
