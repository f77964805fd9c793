"""The tag-before-token linearization shared by DAGA and MulDA (SPEC §3): ``B-PER john I-PER smith went``.

An LM over these sequences learns words and labels together, and its samples read back as tagged
sentences. A word with the BIO shape (upper-case ``B-``/``I-`` prefix) is a tag, so
``parse(linearize(s)) == s`` holds for normalised tags, tokens without that shape (lower-cased text
never has it) and empty ``meta``.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from aclm.base.data import TaggedSentence, normalise_tags
from aclm.base.text import normal_form
from aclm.steps import screening
from aclm.steps.screening import MalformedGeneration

_TAG_SHAPE = re.compile(r"^[BI]-\S+$")


def tag_vocabulary(sentences: Iterable[TaggedSentence]) -> set[str]:
    """``B-X`` and ``I-X`` for every entity type of ``sentences`` (the tags a sample may use)."""
    types = {etype for s in sentences for etype in s.entity_types}
    return {f"{prefix}-{etype}" for etype in types for prefix in "BI"}


def linearize(sentence: TaggedSentence) -> list[str]:
    """Words with each entity token preceded by its tag."""
    words: list[str] = []
    for token, tag in zip(sentence.tokens, sentence.tags):
        if tag != "O":
            words.append(tag)
        words.append(token)
    return words


def parse(words: Sequence[str], known_tags: set[str]) -> TaggedSentence:
    """Read a linearized sequence back (an ``I-`` opening becomes ``B-``), or raise :class:`MalformedGeneration`."""
    if not words:
        raise MalformedGeneration("empty")
    tokens: list[str] = []
    out_tags: list[str] = []
    pending: str | None = None
    for i, word in enumerate(words):
        if _TAG_SHAPE.match(word):
            if word not in known_tags:
                raise MalformedGeneration("unknown_tag", f"{word!r} at {i}")
            if pending is not None:
                raise MalformedGeneration("tag_without_word", f"{pending!r} followed by {word!r} at {i}")
            pending = word
            continue
        tokens.append(word)
        out_tags.append(pending or "O")
        pending = None
    if pending is not None:
        raise MalformedGeneration("tag_without_word", f"{pending!r} ends the sequence")
    return TaggedSentence(tokens, normalise_tags(out_tags))


Sample = tuple[list[str], bool]   # words, and whether the sample reached its end
Key = tuple[tuple[str, ...], tuple[str, ...]]


def _key(sentence: TaggedSentence) -> Key:
    return normal_form(sentence.tokens), tuple(sentence.tags)


def parse_sample(sample: Sample, known_tags: set[str]) -> TaggedSentence:
    """:func:`parse` of a finished sample; one cut off before its end is malformed (``truncated``)."""
    words, finished = sample
    if not finished:
        raise MalformedGeneration("truncated", f"{len(words)} words")
    return parse(words, known_tags)


def screen(samples: Sequence[Sample], known_tags: set[str],
           training: Sequence[TaggedSentence]) -> tuple[list[tuple[int, TaggedSentence]], dict[str, int]]:
    """Keep the finished, well-formed, new samples (with their index), counting every drop: DAGA's and MulDA's
    screening, a copy being any training sentence."""
    copies = {_key(s) for s in training}
    screened, counts = screening.screen([None] * len(samples), samples,
                                        parse=lambda sample: parse_sample(sample, known_tags),
                                        is_copy=lambda _, sentence: _key(sentence) in copies)
    return [(i, v.sentence) for i, v in enumerate(screened) if v.status == screening.KEPT], counts
