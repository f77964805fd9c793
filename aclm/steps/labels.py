"""The label-token language ACLM, MulDA and MELM share: linearization (SPEC §2 S3), label-token init
words, and reading generations back (SPEC §2 S6).

:data:`PARSERS`: ``strict`` (the project's) or ``released`` (the released S5 script's; differences in
docs/reference-code.md, "Reading generations").
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from aclm.base.data import TaggedSentence, normalise_tags
from aclm.steps.screening import MalformedGeneration

#: Tokens that may survive decoding and are removed before parsing.
UNKNOWN = "<unk>"
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", UNKNOWN)

_LABEL_RE = re.compile(r"<([bi])-([^<>\s]+)>", re.IGNORECASE)
# mBART-50 language codes (en_XX, zh_CN, ...): all are two lower-case letters, '_', two upper-case.
_LANGUAGE_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[a-z]{2}_[A-Z]{2}(?![A-Za-z0-9])")


def label_token(tag: str) -> str:
    """``B-PER`` -> ``<b-per>``."""
    return f"<{tag.lower()}>"


def label_tokens(types: Iterable[str]) -> list[str]:
    """The 2 label tokens of every type, in sorted type order (added to the generator's vocabulary)."""
    return [label_token(f"{prefix}-{etype}") for etype in sorted(set(types)) for prefix in "BI"]


def linearize(tokens: Sequence[str], tags: Sequence[str]) -> list[str]:
    """Wrap each entity word in its label token; joined with spaces this is the generator's target."""
    out: list[str] = []
    for word, tag in zip(tokens, tags):
        out += [word] if tag == "O" else [label_token(tag), word, label_token(tag)]
    return out


# --------------------------------------------------------------------------- templates


#: A word added to a label token's init words, so that ``<b-x>`` and ``<i-x>`` start apart.
POSITION_WORDS = {"b": "begin", "i": "inside"}


def type_words(etype: str, init_words: Mapping[str, str]) -> str:
    """``PER`` -> ``person``: the type's words in ``init_words`` (any case), else its own name."""
    return {k.lower(): v for k, v in init_words.items()}.get(etype.lower(), etype.lower())


def label_words(tag: str, init_words: Mapping[str, str]) -> str:
    """``B-PER`` -> ``person begin``: the words that tag's label token starts from."""
    prefix, etype = tag.split("-", 1)
    return f"{type_words(etype, init_words)} {POSITION_WORDS[prefix.lower()]}"


# --------------------------------------------------------------------------- parsing generations


def _type_lookup(known_types: Iterable[str]) -> dict[str, str]:
    """Lower-cased type -> the type as the dataset spells it (label tokens are lower-case)."""
    lookup: dict[str, str] = {}
    for etype in known_types:
        if lookup.setdefault(etype.lower(), etype) != etype:
            raise ValueError(f"entity types {lookup[etype.lower()]!r} and {etype!r} share one label token")
    return lookup


def _strip_special(text: str) -> str:
    """Blank out sequence markers and language codes, even when glued to words (decoding may keep them)."""
    for token in SPECIAL_TOKENS:
        text = text.replace(token, " ")
    return _LANGUAGE_CODE_RE.sub(" ", text)


def parse_generation(text: str, known_types: Iterable[str], mask_token: str = "<mask>") -> TaggedSentence:
    """Words and BIO tags of a generation (the strict reading), or :class:`MalformedGeneration`.

    Words in a pair of identical label tokens take its tag (later words ``I-``); a run opening with ``I-``
    becomes ``B-``. An unfilled mask is rejected, not deleted (that would change the sentence), and so is
    a kept ``<unk>`` (its word lost characters, as ``묀`` of ``묀헨글라트바흐``).
    """
    if mask_token in text:
        raise MalformedGeneration("unfilled_mask", repr(text))
    if UNKNOWN in text:
        raise MalformedGeneration("lost_characters", repr(text))
    types = _type_lookup(known_types)
    tokens: list[str] = []
    tags: list[str] = []
    opened: str | None = None
    inside: list[str] = []
    for word in _strip_special(text).split():
        match = _LABEL_RE.fullmatch(word)
        if match is None:
            if _LABEL_RE.search(word):
                raise MalformedGeneration("glued_tag", word)
            if opened:
                inside.append(word)
            else:
                tokens.append(word)
                tags.append("O")
            continue
        prefix, etype = match.group(1).upper(), types.get(match.group(2).lower())
        if etype is None:
            raise MalformedGeneration("unknown_tag", word)
        if opened is None:
            opened, inside = word.lower(), []
        elif word.lower() != opened:
            raise MalformedGeneration("unpaired_tag", f"{opened} closed by {word}")
        elif not inside:
            raise MalformedGeneration("empty", f"nothing between {opened} and {word}")
        else:
            tokens += inside
            tags += [f"{prefix}-{etype}"] + [f"I-{etype}"] * (len(inside) - 1)
            opened = None
    if opened is not None:
        raise MalformedGeneration("unpaired_tag", f"{opened} never closed")
    if not tokens:
        raise MalformedGeneration("empty", repr(text))
    return TaggedSentence(tokens, normalise_tags(tags))


# --------------------------------------------------------------------------- the released code's reading


def _released_rejection(word: str, labels: dict[str, str], mask_token: str) -> str | None:
    """Why the released validity check refuses ``word`` (None: it passes): a word starting with ``<`` or ending
    with ``>`` must be exactly a label token.  Any mask token is refused (the released code only met ``<mask>``)."""
    if word in labels:
        return None
    if word == mask_token:
        return "unfilled_mask"
    opens, closes = word.startswith("<"), word.endswith(">")
    if not (opens or closes):
        return None
    if mask_token in word:
        return "unfilled_mask"
    return "unknown_tag" if opens and closes else "glued_tag"


def parse_generation_released(text: str, known_types: Iterable[str], mask_token: str = "<mask>") -> TaggedSentence:
    """Words and tags as the released S5 script keeps them, or :class:`MalformedGeneration`.

    Label tokens alternately open and close (any closes: ``<b-per> x <i-loc>`` is kept), ``I-`` openings
    are not repaired, a pair's words become one token. Where the script writes broken CoNLL (an empty pair,
    splitting only at spaces) the clean reading is kept (docs/reference-code.md, "Reading generations").
    """
    labels = _label_tags(known_types)
    words = _strip_special(text).split()
    for word in words:
        reason = _released_rejection(word, labels, mask_token)
        if reason:
            raise MalformedGeneration(reason, word)
    if sum(word in labels for word in words) % 2:
        raise MalformedGeneration("unpaired_tag", f"an odd number of label tokens in {text!r}")
    tokens: list[str] = []
    tags: list[str] = []
    opened: str | None = None
    inside: list[str] = []
    for word in words:
        if word not in labels:
            if opened:
                inside.append(word)
            else:
                tokens.append(word)
                tags.append("O")
        elif opened is None:
            opened, inside = labels[word], []
        elif not inside:
            raise MalformedGeneration("empty", f"nothing between a {opened} token and {word}")
        else:
            tokens.append(" ".join(inside))
            tags.append(opened)
            opened = None
    if not tokens:
        raise MalformedGeneration("empty", repr(text))
    return TaggedSentence(tokens, tags)


def _label_tags(known_types: Iterable[str]) -> dict[str, str]:
    """Label token -> its tag as the dataset spells it (``<b-per>`` -> ``B-PER``)."""
    return {label_token(f"{prefix}-{etype}"): f"{prefix}-{etype}"
            for etype in _type_lookup(known_types).values() for prefix in "BI"}


#: How a generation is read back: ``generation.parse`` names one.
PARSERS = {"strict": parse_generation, "released": parse_generation_released}
