"""S6: turn parsed generations into training data, for every augmentation method (SPEC §2 S6).

Drops, each counted: (near-)copies of the source in normalised text (:mod:`aclm.base.text`; the released
code never compares, ``drop_copies: off``), optionally entity-free ones, and optionally those S1 does not
tag identically (consistency filter: released ACLM, MELM, WikiNEuRal's "NE confirmation").
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Callable, Sequence

from omegaconf import DictConfig

from aclm.base.data import TaggedSentence, normalise_tags
from aclm.base.text import normal_form


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Token-sequence similarity in [0, 1] (1 = identical)."""
    return 1.0 if list(a) == list(b) else SequenceMatcher(a=list(a), b=list(b), autojunk=False).ratio()


def too_similar(aug: TaggedSentence, sources: Sequence[TaggedSentence], max_similarity: float) -> bool:
    """A copy of any source in normalised text (a zh copy with commas made ASCII is a copy); with
    max_similarity < 1, anything at least that close."""
    new = normal_form(aug.tokens)
    for src in sources:
        old = normal_form(src.tokens)
        if new == old:
            return True
        if max_similarity < 1.0 and similarity(new, old) >= max_similarity:
            return True
    return False


def filter_augmentations(candidates: list[tuple[TaggedSentence, list[TaggedSentence]]], cfg: DictConfig,
                         predict: Callable[[list[TaggedSentence]], list[list[str]]] | None = None
                         ) -> tuple[list[tuple[TaggedSentence, list[TaggedSentence]]], dict]:
    """Keep the (augmentation, sources) pairs that pass every configured check."""
    counts = {"candidates": len(candidates), "copy_of_source": 0, "entity_free": 0, "inconsistent": 0}
    kept = []
    for aug, sources in candidates:
        if cfg.drop_copies and too_similar(aug, sources, cfg.max_similarity):
            counts["copy_of_source"] += 1
        elif cfg.drop_entity_free and not aug.spans():
            counts["entity_free"] += 1
        else:
            kept.append((aug, sources))
    if cfg.consistency_filter and kept:
        if predict is None:
            raise ValueError("postprocess.consistency_filter needs the gold NER model")
        predicted = predict([aug for aug, _ in kept])
        # compared as BIO read back from spans (an I- opening counts as B-), as the tagger predicts them
        consistent = [pair for pair, tags in zip(kept, predicted) if tags == normalise_tags(pair[0].tags)]
        counts["inconsistent"] = len(kept) - len(consistent)
        kept = consistent
    counts["kept"] = len(kept)
    return kept, counts
