"""S3: the generator's templates, and reading its generations back (S5/S6).

A template keeps a sentence's entities (linearized: ``<b-per> john <b-per>``)
and its keywords, and masks everything else.  It is built in three steps:
selective masking and linearization (:func:`skeleton`), an optional mixner
join of two sentences (:func:`join`), then dynamic masking of some keywords
(:func:`dynamic_mask`), redrawn every epoch and every generation round.
Keeping the sentence as pieces until :func:`render` is what lets mixner join
two sentences before the keywords are masked.

A generation is read back by one of :data:`PARSERS`: ``strict`` (the
project's rule) or ``released`` (the authors' released S5 script, for the
``reference_code`` profile; docs/reference-code.md lists where they differ).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Iterable, Literal, Sequence

from aclm.base.data import TaggedSentence, normalise_tags
from aclm.steps.screening import MalformedGeneration

Role = Literal["entity", "keyword", "mask"]

#: Tokens that may survive decoding and are removed before parsing.
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")

_LABEL_RE = re.compile(r"<([bi])-([^<>\s]+)>", re.IGNORECASE)
# mBART-50 language codes (en_XX, zh_CN, ...): all are two lower-case letters, '_', two upper-case.
_LANGUAGE_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[a-z]{2}_[A-Z]{2}(?![A-Za-z0-9])")


@dataclass(frozen=True)
class Piece:
    """One word of a template: kept as an entity, kept as a keyword, or masked."""

    text: str
    tag: str
    role: Role


def pieces_to_json(pieces: Sequence[Piece]) -> list[list[str]]:
    """A skeleton as S3 stores it: ``[text, tag, role]`` per word."""
    return [[p.text, p.tag, p.role] for p in pieces]


def pieces_from_json(rows: Sequence[Sequence[str]]) -> list[Piece]:
    return [Piece(*row) for row in rows]


# --------------------------------------------------------------------------- label tokens


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


def skeleton(sentence: TaggedSentence, keywords: Iterable[int]) -> list[Piece]:
    """Steps 1-2: entity words stay (tagged), keywords stay, every other word is a mask."""
    keep = set(keywords)
    return [Piece(word, tag, "entity" if tag != "O" else "keyword" if i in keep else "mask")
            for i, (word, tag) in enumerate(zip(sentence.tokens, sentence.tags))]


def join(a: Sequence[Piece], b: Sequence[Piece]) -> list[Piece]:
    """mixner: the sentence's own pieces first, then those of its retrieved neighbour."""
    return [*a, *b]


def keyword_mask_share(num_keywords: int, rng: random.Random) -> float:
    """ACLM's dynamic masking: the share ε of a template's K keywords to mask, ε ~ N(0.5, σ = 1/K),
    redrawn until it lies in [0, 1]."""
    while True:
        eps = rng.gauss(0.5, 1.0 / num_keywords)
        if 0.0 <= eps <= 1.0:
            return eps


def dynamic_mask(pieces: Sequence[Piece], rng: random.Random) -> list[Piece]:
    """Step 3: mask ``round(K·ε)`` of the K keywords, chosen at random (Python's round: half to even)."""
    positions = [i for i, piece in enumerate(pieces) if piece.role == "keyword"]
    if not positions:
        return list(pieces)
    chosen = set(rng.sample(positions, round(len(positions) * keyword_mask_share(len(positions), rng))))
    return [replace(piece, role="mask") if i in chosen else piece for i, piece in enumerate(pieces)]


def render(pieces: Sequence[Piece], mask_token: str) -> str:
    """The template text: entities linearized, keywords as they are, each run of masks as one mask token."""
    words: list[str] = []
    previous: Role | None = None
    for piece in pieces:
        if piece.role == "entity":
            words += linearize([piece.text], [piece.tag])
        elif piece.role == "keyword":
            words.append(piece.text)
        elif previous != "mask":
            words.append(mask_token)
        previous = piece.role
    return " ".join(words)


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
    (``empty``), and a mask token the generator left unfilled
    (``unfilled_mask``: deleting it would silently change the sentence).
    """
    if mask_token in text:
        raise MalformedGeneration("unfilled_mask", repr(text))
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
