"""What the generator's length limits cut, counted with its own tokenizer, before anything trains.

A target is a gold sentence linearised with its label tokens, framed as S4 frames it (the language code,
the pieces, the end).  S5 writes about as many tokens for a plain round, and about two sentences' worth
for a mixner round; a mixed output is estimated by joining each sentence with the next one of the file,
as a stand-in for its nearest neighbour.  With the real mBART-50 vocabulary these shares differ by
language: Chinese targets are about twice as long as English ones (docs/languages.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

from aclm.base.data import TaggedSentence, entity_types
from aclm.steps.generator import language_code, set_language
from aclm.steps.labels import label_tokens, linearize

#: A limit cutting more than this share of what passes it is worth a warning.
WARN_SHARE = 0.01


@dataclass(frozen=True)
class Cut:
    """How many of ``total`` items of one kind a length limit (a config key and its value) cuts."""

    what: str
    key: str
    limit: int
    over: int
    total: int

    @property
    def share(self) -> float:
        return self.over / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.what} over {self.key}={self.limit}: {self.over} of {self.total} ({self.share:.1%})"


def labelled(tokenizer, sentences: Sequence[TaggedSentence]):
    """A copy of the generator's tokenizer with the sentences' label tokens, each one token as S4 adds it."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.add_special_tokens({"additional_special_tokens": label_tokens(entity_types(sentences))},
                                 replace_additional_special_tokens=False)
    return tokenizer


def target_lengths(tokenizer, sentences: Sequence[TaggedSentence], language: str | None) -> list[int]:
    """Each sentence's length as S4's target, in the tokens of a :func:`labelled` tokenizer."""
    if not sentences:
        return []
    if language:
        set_language(tokenizer, language_code(tokenizer, language))
    targets = [" ".join(linearize(s.tokens, s.tags)) for s in sentences]
    return [len(ids) for ids in tokenizer(text_target=targets, verbose=False)["input_ids"]]


def mixed_lengths(lengths: Sequence[int]) -> list[int]:
    """Two neighbouring targets joined: one language code and one end for the pair."""
    return [a + b - 2 for a, b in zip(lengths, lengths[1:])]


def generator_cuts(tokenizer, sentences: Sequence[TaggedSentence], language: str | None, generator_limit: int,
                   generation_limit: int, mixner: bool) -> list[Cut]:
    """The shares S4's and S5's limits cut, for sentences of one language (``tokenizer``: :func:`labelled`)."""
    lengths = target_lengths(tokenizer, sentences, language)
    cuts = [Cut("S4 targets", "generator.max_length", generator_limit,
                sum(n > generator_limit for n in lengths), len(lengths)),
            Cut("S5 plain outputs (est.)", "generation.max_length", generation_limit,
                sum(n > generation_limit for n in lengths), len(lengths))]
    if mixner:
        mixed = mixed_lengths(lengths)
        cuts.append(Cut("S5 mixed outputs (est.)", "generation.max_length", generation_limit,
                        sum(n > generation_limit for n in mixed), len(mixed)))
    return cuts
