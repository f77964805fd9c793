"""The label-token language that ACLM, MulDA and MELM share: how a tagged sentence is written with label
tokens (``<b-per> john <i-per> smith``), the words a new label token's embedding starts from, and how a
generated text is read back into words and tags.

A generation is read back by one of :data:`PARSERS`: ``strict`` (the
project's rule) or ``released`` (the authors' released S5 script, for the
``reference_code`` profile; docs/reference-code.md lists where they differ).
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
    """``PER`` or ``per`` -> ``person``: the words naming a type in ``init_words`` (any case), else its own name."""
    return {k.lower(): v for k, v in init_words.items()}.get(etype.lower(), etype.lower())


def label_words(tag: str, init_words: Mapping[str, str]) -> str:
    """``B-PER`` or ``b-per`` -> ``person begin``: the words a token standing for that tag starts from."""
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
    """Words and BIO tags of a generation, or :class:`aclm.steps.screening.MalformedGeneration`.

    The text is split on whitespace.  Words between a pair of identical label
    tokens take that tag (should the pair hold several words, the later ones
    continue the entity as ``I-``); other words are ``O``; a run that starts
    with ``I-`` becomes ``B-``.  Malformed: a label token of a type not in
    ``known_types`` (``unknown_tag``), an opening label token not closed by the
    same token next (``unpaired_tag``), text glued to a label token
    (``glued_tag``), a pair with no word inside or nothing left at all
    (``empty``), a mask token the generator left unfilled
    (``unfilled_mask``: deleting it would silently change the sentence), and
    an ``<unk>`` that decoding kept in sight (``lost_characters``: the word it
    stood in lost the characters the tokenizer cannot write, as ``묀`` of
    ``묀헨글라트바흐``).
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
    """Why the released validity check refuses ``word`` (None: it passes), as one of the shared reasons.

    That check looks only at a word's first and last characters: a word that
    starts with ``<`` or ends with ``>`` must be a label token, exactly (lower
    case).  Text glued inside a word (``a<b-per>b``) passes as a plain word.
    The generator's mask token is refused whatever it looks like (the released
    code only met mBART's ``<mask>``, which its check refuses).
    """
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

    It accepts a generation whose words pass its check (see
    :func:`_released_rejection`) and whose label tokens are even in number,
    then reads label tokens as alternately opening and closing: a pair closed
    by another label token (``<b-per> x <i-loc>``) is kept, its words take the
    opening token's tag, an entity opening with ``I-`` keeps it (no repair),
    and several words inside one pair become one token joined by a space (the
    released script writes them on one CoNLL line).  An odd count of label
    tokens is ``unpaired_tag``.

    Where the released script would write broken CoNLL, the clean reading is
    kept instead: a pair with no word inside (it writes an empty word) is
    ``empty``, and the text is split at any whitespace, not only at spaces
    (it writes tabs and line breaks inside words).  An output with no word
    (the script writes no sentence) is ``empty``.
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
    """Every label token of ``known_types`` -> its tag as the dataset spells it (``<b-per>`` -> ``B-PER``)."""
    return {label_token(f"{prefix}-{etype}"): f"{prefix}-{etype}"
            for etype in _type_lookup(known_types).values() for prefix in "BI"}


#: How a generation is read back: ``generation.parse`` names one.
PARSERS = {"strict": parse_generation, "released": parse_generation_released}
