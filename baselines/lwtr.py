"""Label-wise token replacement (LwTR; Dai & Adel, 2020).

Each token is replaced, with probability ``p``, by a token drawn from the
training tokens that carry the same label, so the tag sequence never changes.

The label is the full BIO tag: ``B-PER`` and ``I-PER`` have separate
distributions, and ``O`` has its own.  Keeping the prefix means a first-token
position is refilled with words seen opening a name and a continuation
position with words seen continuing one, which is what the tag sequence (left
untouched) asserts about them.

Three variants (``lwtr.variant``):

* ``paper``: every token may be replaced; an augmentation that copies its
  source or repeats an earlier one of the same source is dropped.
* ``released``: the rule the LwTR files shipped with the authors' code show (no
  LwTR code was released; docs/reference-code.md gives the evidence): the
  words of NLTK's English stop-word list are never replaced and never drawn,
  in every language, and every augmentation is kept, copies and repeats
  included, so each gold sentence gets exactly R. Python's generator, seeded
  with the run's seed, rounds as the outer loop.
* ``replay``: the same rule, drawn as the released files were (:func:`replay`):
  numpy's legacy Mersenne Twister from ``lwtr.replay_seed`` (26), a coin for
  every token, each sentence's R augmentations in a row. On the released gold
  samples it writes the released files' augmentations word for word.
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
#: The numpy seed the released LwTR files were drawn from: Dai & Adel's LwTR script seeds numpy with half its
#: ``--seed``, 52 by default (docs/reference-code.md).
RELEASED_SEED = 26


def is_fixed(token: str, variant: str) -> bool:
    """Whether ``token`` stays out of replacement, as a replaced token and as a drawn one."""
    return variant in ("released", "replay") and token.lower() in ENGLISH_FUNCTION_WORDS


def token_distribution(sentences: Sequence[TaggedSentence], variant: str = "paper") -> Distribution:
    """Per label, its training tokens (first-seen order) and their relative frequencies.

    Under ``released`` the function words (:func:`is_fixed`) are left out, so they are never drawn.
    """
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
    """One augmentation of ``sentence``: each token (but the fixed ones, :func:`is_fixed`) is replaced
    with probability ``p``.

    The coin flips come first, then one draw of all replacements per label
    (``random.choices`` with ``k``), so a sentence costs one pass over each
    label's distribution rather than one per replaced token.
    """
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
    """``rounds`` augmentations of each sentence, drawn in the order the released LwTR files were.

    One ``numpy.random.RandomState(seed)`` (the generator behind numpy's legacy global functions, so
    ``numpy.random.seed(seed)`` gives the same stream; a private one leaves numpy's global state alone)
    draws everything, sentence by sentence and, within a sentence, augmentation by augmentation. An
    augmentation takes a coin for every token at once (``binomial(1, p, len)``), function words included;
    then, left to right, each token whose coin came up and that is not a function word takes one
    frequency-weighted draw (``choice``) from its label's pool (:func:`token_distribution`, in first-seen
    order), which may return the word already there. A function word's coin is spent and changes nothing.
    Each augmentation's ``meta`` holds ``source_index``, ``round`` and ``redrawn`` (the positions drawn).
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

    Under ``paper`` and ``released`` rounds are the outer loop and one
    ``random.Random(seed)`` drives every :func:`replace`, so the augmentations
    of R rounds start with exactly those of fewer rounds (an R sweep is
    nested). Under ``replay`` :func:`replay` draws them, ``seed`` seeding
    numpy, each sentence's R in a row. Under ``paper`` the shared
    :func:`aclm.steps.screening.screen` drops and counts an augmentation identical
    to its source (``copy``) or to an earlier augmentation of the same source
    (``duplicate``); the other variants keep them all. Each kept one
    records its source's index and its round in ``meta``.
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
    """The method table's entry point: R rounds over the gold sentences, rows for generations.jsonl.

    ``replay`` draws from ``lwtr.replay_seed`` (the same augmentations for every run seed, as the released
    files are one per sample); the other variants from the run's seed.
    """
    seed = c.lwtr.replay_seed if c.lwtr.variant == "replay" else c.seed
    augmented, counts = augment(gold.train, c.lwtr.p, c.generation.rounds, seed, c.lwtr.variant)
    return [kept_row(s, [s.meta["source_index"]], round=s.meta["round"]) for s in augmented], counts
