"""Label-wise token replacement (LwTR; Dai & Adel, 2020; SPEC §3).

Each token is replaced with probability ``p`` by a training token of the same label, so tags never change.
The label is the full BIO tag (``B-PER`` and ``I-PER`` draw apart): a refilled position gets a word seen in
that role, as the untouched tags assert.
``lwtr.variant`` (evidence: docs/reference-code.md, "LwTR as released"): ``paper`` drops copies and repeats;
``released`` is the rule the shipped LwTR files show (no code was released): NLTK's English stop words are
never replaced nor drawn, in every language, and all R augmentations are kept; ``replay`` draws that rule as
the files were (numpy seeded ``lwtr.replay_seed`` 26), reproducing them word for word.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Sequence

import numpy as np

from aclm.base.augmentation import kept_row
from aclm.base.data import TaggedSentence
from aclm.steps.screening import KEPT, screen

Distribution = dict[str, tuple[list[str], list[float]]]

#: NLTK's English stop-word list (179 words), the function words the released LwTR files never touch.
ENGLISH_FUNCTION_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've
now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())
VARIANTS = ("paper", "released", "replay")
#: The released files' numpy seed: Dai & Adel's script seeds numpy with half its ``--seed`` (default 52).
RELEASED_SEED = 26


def is_fixed(token: str, variant: str) -> bool:
    """Whether ``token`` stays out of replacement, as a replaced token and as a drawn one."""
    return variant in ("released", "replay") and token.lower() in ENGLISH_FUNCTION_WORDS


def token_distribution(sentences: Sequence[TaggedSentence], variant: str = "paper") -> Distribution:
    """Per label, its training tokens (first-seen order) and relative frequencies, fixed words left out."""
    counts: dict[str, Counter] = {}
    for sentence in sentences:
        for token, tag in zip(sentence.tokens, sentence.tags):
            if not is_fixed(token, variant):
                counts.setdefault(tag, Counter())[token] += 1
    dist: Distribution = {}
    for tag, counter in counts.items():
        total = sum(counter.values())
        dist[tag] = (list(counter), [c / total for c in counter.values()])
    return dist


def replace(sentence: TaggedSentence, dist: Distribution, p: float, rng: random.Random,
            variant: str = "paper") -> TaggedSentence:
    """One augmentation: each non-fixed token replaced with probability ``p``; coins first, then one
    ``random.choices`` draw per label (one pass over its distribution, not one per token)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p} must lie in [0, 1]")
    chosen = [i for i, token in enumerate(sentence.tokens) if not is_fixed(token, variant) and rng.random() < p]
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


def replay(sentences: Sequence[TaggedSentence], p: float, rounds: int,
           seed: int = RELEASED_SEED) -> list[TaggedSentence]:
    """``rounds`` augmentations of each sentence, drawn as the released LwTR files were.

    A private ``RandomState(seed)`` (the same stream as ``numpy.random.seed``) goes sentence by sentence, round
    by round: ``binomial(1, p, len)`` coins for all tokens (a function word's is spent for nothing), then
    left to right one frequency-weighted ``choice`` per replaced token, which may return the same word.
    """
    dist = token_distribution(sentences, "replay")
    pools = {tag: (words, np.array(shares)) for tag, (words, shares) in dist.items()}
    rng = np.random.RandomState(seed)
    out = []
    for index, source in enumerate(sentences):
        for round_ in range(rounds):
            tokens, redrawn = list(source.tokens), []
            for j, coin in enumerate(rng.binomial(1, p, len(tokens))):
                if coin and not is_fixed(tokens[j], "replay"):
                    words, shares = pools[source.tags[j]]
                    tokens[j] = words[rng.choice(len(words), p=shares)]
                    redrawn.append(j)
            out.append(TaggedSentence(tokens, list(source.tags),
                                      {"source_index": index, "round": round_, "redrawn": redrawn}))
    return out


def augment(sentences: Sequence[TaggedSentence], p: float, rounds: int,
            seed: int, variant: str = "paper") -> tuple[list[TaggedSentence], dict[str, int]]:
    """``rounds`` augmentations of every sentence, with the drop counts.

    Under ``paper``/``released`` rounds are the outer loop of one ``random.Random(seed)``, so an R sweep is
    nested (R rounds start with those of fewer). Only ``paper`` drops copies and repeats.
    """
    if variant not in VARIANTS:
        raise ValueError(f"lwtr.variant={variant!r} is not one of {VARIANTS}")
    if variant == "replay":
        drawn = [(new.meta["round"], new.meta["source_index"], new) for new in replay(sentences, p, rounds, seed)]
    else:
        dist = token_distribution(sentences, variant)
        rng = random.Random(seed)
        drawn = [(round_, index, replace(source, dist, p, rng, variant))
                 for round_ in range(rounds) for index, source in enumerate(sentences)]
    is_copy = (lambda i, new: new.tokens == sentences[drawn[i][1]].tokens) if variant == "paper" else None
    screened, counts = screen([index for _, index, _ in drawn], [new for *_, new in drawn], is_copy=is_copy,
                              dedupe="parsed" if variant == "paper" else "off")
    kept: list[TaggedSentence] = []
    for (round_, index, new), verdict in zip(drawn, screened):
        if verdict.status == KEPT:
            new.meta.update(method="lwtr", source_index=index, round=round_)
            kept.append(new)
    return kept, counts


def augment_gold(c, gold) -> tuple[list[dict], dict]:
    """The method table's entry point.  ``replay`` ignores the run's seed (the released files are one per
    sample); the other variants use it."""
    seed = c.lwtr.replay_seed if c.lwtr.variant == "replay" else c.seed
    augmented, counts = augment(gold.train, c.lwtr.p, c.generation.rounds, seed, c.lwtr.variant)
    return [kept_row(s, [s.meta["source_index"]], round=s.meta["round"]) for s in augmented], counts
