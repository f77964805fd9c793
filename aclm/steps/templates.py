"""S3: the generator's templates (SPEC §2 S3).

Entities (linearized) and keywords stay, all else is masked: :func:`skeleton` (steps 1-2), an optional
mixner :func:`join`, then :func:`dynamic_mask` (step 3), redrawn every epoch and round. Sentences stay
pieces until :func:`render`, so mixner can join two before keywords are masked. Label tokens:
:mod:`aclm.steps.labels`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Iterable, Literal, Mapping, Sequence

from aclm.base.data import TaggedSentence
from aclm.steps.labels import linearize

Role = Literal["entity", "keyword", "mask"]

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


def templates_of_split(rows: Sequence[Mapping], mask_token: str, seed: int) -> list[dict]:
    """S3 over a split: each S2 row with its ``pieces``, ``target`` (what S4 learns to write), template and
    one dynamic-masking example."""
    out = []
    for i, row in enumerate(rows):
        pieces = skeleton(TaggedSentence(row["tokens"], row["tags"]), row["keywords"])
        out.append({"tokens": row["tokens"], "tags": row["tags"], "keywords": row["keywords"],
                    "pieces": pieces_to_json(pieces), "target": " ".join(linearize(row["tokens"], row["tags"])),
                    "template": render(pieces, mask_token),
                    "example": render(dynamic_mask(pieces, random.Random(f"{seed}:example:{i}")), mask_token)})
    return out
