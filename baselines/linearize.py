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
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

from aclm.data import TaggedSentence, normalise_tags

_TAG_SHAPE = re.compile(r"^[BI]-\S+$")

EMPTY = "empty"
TAG_WITHOUT_WORD = "tag_without_word"
UNKNOWN_TAG = "unknown_tag"
REASONS = (EMPTY, TAG_WITHOUT_WORD, UNKNOWN_TAG)


class InvalidSequence(ValueError):
    """A generated sequence that is not a linearized sentence; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


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

    Raises :class:`InvalidSequence` for an empty sequence, a tag not followed
    by a word (at the end or before another tag) and a tag-shaped word that is
    not in ``known_tags``.
    """
    if not words:
        raise InvalidSequence(EMPTY)
    tokens: list[str] = []
    out_tags: list[str] = []
    pending: str | None = None
    for i, word in enumerate(words):
        if _TAG_SHAPE.match(word):
            if word not in known_tags:
                raise InvalidSequence(UNKNOWN_TAG, f"{word!r} at {i}")
            if pending is not None:
                raise InvalidSequence(TAG_WITHOUT_WORD, f"{pending!r} followed by {word!r} at {i}")
            pending = word
            continue
        tokens.append(word)
        out_tags.append(pending or "O")
        pending = None
    if pending is not None:
        raise InvalidSequence(TAG_WITHOUT_WORD, f"{pending!r} ends the sequence")
    return TaggedSentence(tokens, normalise_tags(out_tags))


Sample = tuple[list[str], bool]   # words, and whether the sample reached its end
Key = tuple[tuple[str, ...], tuple[str, ...]]


def _key(sentence: TaggedSentence) -> Key:
    return tuple(sentence.tokens), tuple(sentence.tags)


def screen(samples: Sequence[Sample], known_tags: set[str],
           training: Sequence[TaggedSentence]) -> tuple[list[tuple[int, TaggedSentence]], dict[str, int]]:
    """Keep the finished, well-formed, new samples (with their index), counting every drop.

    Shared by the generate-from-scratch methods (DAGA, MulDA): a sample is
    dropped when it was cut off before its end, does not parse, copies a
    training sentence or repeats an earlier sample (same words and tags).
    """
    counts = Counter({"generated": len(samples), "dropped_truncated": 0, "dropped_invalid": 0,
                      **{f"invalid_{r}": 0 for r in REASONS},
                      "dropped_training_duplicate": 0, "dropped_duplicate": 0})
    copies = {_key(s) for s in training}
    seen: set[Key] = set()
    kept: list[tuple[int, TaggedSentence]] = []
    for index, (words, finished) in enumerate(samples):
        if not finished:
            counts["dropped_truncated"] += 1
            continue
        try:
            new = parse(words, known_tags)
        except InvalidSequence as err:
            counts["dropped_invalid"] += 1
            counts[f"invalid_{err.reason}"] += 1
            continue
        key = _key(new)
        if key in copies:
            counts["dropped_training_duplicate"] += 1
        elif key in seen:
            counts["dropped_duplicate"] += 1
        else:
            seen.add(key)
            kept.append((index, new))
    counts["kept"] = len(kept)
    return kept, dict(counts)
