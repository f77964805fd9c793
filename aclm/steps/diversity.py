"""Diversity of augmentations against their source sentences (ACLM Table 3).

For one pair (source, augmentation):

- entity novelty: of the augmentation's entity words (tokens whose tag is
  not ``O``, counted with repetition), the fraction that do not occur
  anywhere among the source's tokens (entity or not);
- non-entity novelty: the same for the augmentation's ``O`` tokens;
- length difference: ``|len(augmentation) - len(source)|`` in tokens.

Diversity-E and Diversity-N average the novelties over the augmentations
that have at least one entity (respectively non-entity) word, in percent as
the paper reports them; Diversity-L averages the length difference over all
pairs.  A score with no pair to average over is ``None``.

Methods that generate from scratch (DAGA, MulDA) have no source sentence, so
they have no pairs and every score is ``None`` for them.
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
    """``diversity_e`` and ``diversity_n`` (percent) and ``diversity_l`` (tokens) of (source, augmentation) pairs."""
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
