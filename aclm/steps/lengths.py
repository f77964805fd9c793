"""What the generator's length limits cut, counted with its own tokenizer before anything trains.

A plain S5 output is estimated by S4's target length; a mixner output by joining each sentence with the
next in the file (a stand-in for its neighbour). Shares differ by language (docs/languages.md, "Lengths").
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
    """How many of ``total`` items a length limit (config key and value) cuts."""

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
    """A copy of the generator's tokenizer with the label tokens added, as S4 adds them."""
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
