"""Screening generations: why one is dropped, and the one function that drops and counts (SPEC §2 S5).

ACLM's S5, LwTR, DAGA, MulDA and MELM all call :func:`screen`, so their ``report.json`` counts share
:data:`COUNT_KEYS`; a row's status is one of them but ``generated``:
- ``duplicate``: repeats an earlier candidate of the same source (from scratch: any earlier one), judged
  per :data:`DEDUPE`: ``parsed`` words (normalised, :mod:`aclm.base.text`) and tags, ``raw`` text before
  parsing as the released ACLM script, or ``off`` (the released LwTR files keep repeats);
- ``copy``: reproduces its source (LwTR; MELM: seed or gold source) or, from scratch (DAGA, MulDA), any
  training sentence. Always 0 for ACLM: its S6 drops copies as ``copy_of_source``, with a near-copy threshold;
- ``malformed_<reason>``: not a tagged sentence (:data:`REASONS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from aclm.base.data import TaggedSentence
from aclm.base.text import normal_form

#: Why a generation is not a tagged sentence, for every method.
REASONS = (
    "empty",             # nothing left, or a label pair with no word between (ACLM, MELM, DAGA, MulDA)
    "unknown_tag",       # a label of a type the data does not have
    "unpaired_tag",      # an opening label token not closed by the same token next (ACLM, MELM)
    "glued_tag",         # text glued to a label token (ACLM, MELM)
    "tag_without_word",  # a tag followed by another tag or by the end (DAGA, MulDA)
    "unfilled_mask",     # a mask token the generator left (ACLM, MELM)
    "tags_changed",      # the filled sentence's tags differ from its seed's (MELM)
    "truncated",         # cut off at the length limit before its end (DAGA, MulDA; ACLM with at_limit=drop)
    "lost_characters",   # a word lost characters the tokenizer cannot write, <unk> (ACLM, strict reading)
)
KEPT, DUPLICATE, COPY = "kept", "duplicate", "copy"
MALFORMED = "malformed_"
STATUSES = (KEPT, DUPLICATE, COPY, *(MALFORMED + r for r in REASONS))
COUNT_KEYS = ("generated", *STATUSES)
#: What makes a candidate a repeat of an earlier one of its source (see ``duplicate`` above).
DEDUPE = ("parsed", "raw", "off")


class MalformedGeneration(ValueError):
    """A generation that cannot be read back as a tagged sentence; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r} for a malformed generation; known: {REASONS}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason

    @property
    def status(self) -> str:
        return MALFORMED + self.reason


@dataclass
class Screened:
    """One candidate's verdict: its status and, unless malformed, the sentence it was read as."""

    status: str
    sentence: TaggedSentence | None


def zero_counts(generated: int = 0) -> dict[str, int]:
    """Every count key, at zero but ``generated``."""
    return {key: 0 for key in COUNT_KEYS} | {"generated": generated}


def screen(sources: Sequence[Hashable], outputs: Sequence[Any],
           parse: Callable[[Any], TaggedSentence] | None = None,
           is_copy: Callable[[int, TaggedSentence], bool] | None = None,
           dedupe: str = "parsed") -> tuple[list[Screened], dict[str, int]]:
    """Read back, drop and count every candidate, in order.

    Repeats are sought among earlier candidates with the same ``sources`` key (from scratch: one key for
    all). Without ``parse``, outputs are already sentences or :class:`MalformedGeneration`; ``raw`` dedupe
    needs hashable outputs. ``is_copy`` is checked before repeats, and a copy is not remembered as seen.
    """
    if len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources for {len(outputs)} outputs")
    if dedupe not in DEDUPE:
        raise ValueError(f"dedupe={dedupe!r} is not one of {DEDUPE}")
    counts = zero_counts(len(outputs))
    rows: list[Screened] = []
    seen: set = set()
    for i, (source, output) in enumerate(zip(sources, outputs)):
        if dedupe == "raw":
            repeated = (source, output) in seen
            seen.add((source, output))
            if repeated:
                counts[DUPLICATE] += 1
                rows.append(Screened(DUPLICATE, None))
                continue
        sentence = None
        try:
            sentence = parse(output) if parse is not None else output
        except MalformedGeneration as err:
            sentence = err
        if isinstance(sentence, MalformedGeneration):
            status, sentence = sentence.status, None
        elif not isinstance(sentence, TaggedSentence):
            raise TypeError(f"candidate {i}: expected a TaggedSentence or MalformedGeneration, got {type(sentence)}")
        elif is_copy is not None and is_copy(i, sentence):
            status = COPY
        elif dedupe == "parsed":
            key = (source, normal_form(sentence.tokens), tuple(sentence.tags))
            status = DUPLICATE if key in seen else KEPT
            seen.add(key)
        else:
            status = KEPT
        counts[status] += 1
        rows.append(Screened(status, sentence))
    return rows, counts
