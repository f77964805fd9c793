"""Label-wise token replacement (LwTR; Dai & Adel, 2020).

Each token is replaced, with probability ``p``, by a token drawn from the
training tokens that carry the same label, so the tag sequence never changes.

The label is the full BIO tag: ``B-PER`` and ``I-PER`` have separate
distributions, and ``O`` has its own.  Keeping the prefix means a first-token
position is refilled with words seen opening a name and a continuation
position with words seen continuing one, which is what the tag sequence (left
untouched) asserts about them.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Sequence

from aclm.augmentation import kept_row
from aclm.data import TaggedSentence
from aclm.screening import KEPT, screen

Distribution = dict[str, tuple[list[str], list[float]]]


def token_distribution(sentences: Sequence[TaggedSentence]) -> Distribution:
    """Per label, its training tokens (first-seen order) and their relative frequencies."""
    counts: dict[str, Counter] = {}
    for sentence in sentences:
        for token, tag in zip(sentence.tokens, sentence.tags):
            counts.setdefault(tag, Counter())[token] += 1
    dist: Distribution = {}
    for tag, counter in counts.items():
        total = sum(counter.values())
        dist[tag] = (list(counter), [c / total for c in counter.values()])
    return dist


def replace(sentence: TaggedSentence, dist: Distribution, p: float, rng: random.Random) -> TaggedSentence:
    """One augmentation of ``sentence``: each token is replaced with probability ``p``.

    The coin flips come first, then one draw of all replacements per label
    (``random.choices`` with ``k``), so a sentence costs one pass over each
    label's distribution rather than one per replaced token.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p} must lie in [0, 1]")
    chosen = [i for i in range(len(sentence)) if rng.random() < p]
    by_label: dict[str, list[int]] = {}
    for i in chosen:
        by_label.setdefault(sentence.tags[i], []).append(i)
    tokens = list(sentence.tokens)
    for tag, positions in by_label.items():
        if tag not in dist:
            raise ValueError(f"label {tag!r} has no training tokens to draw from")
        vocabulary, probs = dist[tag]
        for i, token in zip(positions, rng.choices(vocabulary, weights=probs, k=len(positions))):
            tokens[i] = token
    return TaggedSentence(tokens, list(sentence.tags))


def augment(sentences: Sequence[TaggedSentence], p: float, rounds: int,
            seed: int) -> tuple[list[TaggedSentence], dict[str, int]]:
    """``rounds`` passes of :func:`replace` over every sentence, with the drop counts.

    Rounds are the outer loop and one generator drives every draw, so the
    augmentations of R rounds start with exactly those of fewer rounds (an
    R sweep is nested).  The shared :func:`aclm.screening.screen` drops and
    counts an augmentation identical to its source (``copy``) or to an earlier
    augmentation of the same source (``duplicate``).  Each kept one records
    its source's index and its round in ``meta``.
    """
    dist = token_distribution(sentences)
    rng = random.Random(seed)
    drawn = [(round_, index, replace(source, dist, p, rng))
             for round_ in range(rounds) for index, source in enumerate(sentences)]
    screened, counts = screen([index for _, index, _ in drawn], [new for *_, new in drawn],
                              is_copy=lambda i, new: new.tokens == sentences[drawn[i][1]].tokens)
    kept: list[TaggedSentence] = []
    for (round_, index, new), verdict in zip(drawn, screened):
        if verdict.status == KEPT:
            new.meta = {"method": "lwtr", "source_index": index, "round": round_}
            kept.append(new)
    return kept, counts


def augment_gold(c, gold) -> tuple[list[dict], dict]:
    """The method table's entry point: R rounds over the gold sentences, rows for generations.jsonl."""
    augmented, counts = augment(gold.train, c.lwtr.p, c.generation.rounds, c.seed)
    return [kept_row(s, [s.meta["source_index"]], round=s.meta["round"]) for s in augmented], counts
