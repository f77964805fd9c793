"""The tag-before-token linearization shared by DAGA and MulDA.

``john smith went`` tagged ``B-PER I-PER O`` becomes
``B-PER john I-PER smith went``: every entity token is preceded by its tag and
``O`` tokens stand alone, so a language model over these sequences learns
words and labels together, and its samples can be read back as tagged
sentences.

A word is read as a tag when it has the BIO shape (``B-`` or ``I-`` and a
type, upper-case prefix).  The round trip ``parse(linearize(s)) == s`` holds
for every sentence with normalised tags whose tokens do not themselves have
that shape (lower-cased text never does) and with empty ``meta``, which
the linearization does not carry.

A sequence that cannot be read back raises
:class:`aclm.steps.screening.MalformedGeneration` with one of the shared reasons
(``empty``, ``tag_without_word``, ``unknown_tag``; ``truncated`` for a sample
cut off before its end), and samples are screened by the shared
:func:`aclm.steps.screening.screen`.
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
    """Read a linearized sequence back; an entity opened by ``I-`` becomes ``B-``.

    Raises :class:`MalformedGeneration` for an empty sequence (``empty``), a
    tag not followed by a word, at the end or before another tag
    (``tag_without_word``), and a tag-shaped word that is not in
    ``known_tags`` (``unknown_tag``).
    """
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
    """Keep the finished, well-formed, new samples (with their index), counting every drop.

    Shared by the generate-from-scratch methods (DAGA, MulDA), through the
    shared :func:`aclm.steps.screening.screen`: a sample is dropped when it was cut
    off before its end (``malformed_truncated``), does not parse
    (``malformed_<reason>``), copies a training sentence (``copy``) or repeats
    an earlier sample, same words and tags (``duplicate``).
    """
    copies = {_key(s) for s in training}
    screened, counts = screening.screen([None] * len(samples), samples,
                                        parse=lambda sample: parse_sample(sample, known_tags),
                                        is_copy=lambda _, sentence: _key(sentence) in copies)
    return [(i, v.sentence) for i, v in enumerate(screened) if v.status == screening.KEPT], counts
