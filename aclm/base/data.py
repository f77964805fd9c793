"""Tagged sentences and the CoNLL-like files they live in.

Every stage writes plain ``token<TAB>tag`` so any artifact can be diffed or fed to other tools. The
reader accepts the other layouts in our data and refuses malformed input with its file and line.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from aclm.base.io import atomic_write_text, split_lines

FORMATS = ("auto", "token_tag", "index_token_tag", "token_offset_tag", "multiconer")
log = logging.getLogger("aclm.base.data")
_TAG_RE = re.compile(r"^(?:O|[BI]-\S+)$", re.IGNORECASE)


class DataError(ValueError):
    """Malformed input, raised with the file and line at fault."""


@dataclass
class TaggedSentence:
    tokens: list[str]
    tags: list[str]
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.tags):
            raise DataError(f"{len(self.tokens)} tokens but {len(self.tags)} tags: {self.tokens}")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def entity_types(self) -> set[str]:
        return {t[2:] for t in self.tags if t != "O"}

    def spans(self) -> list[tuple[int, int, str]]:
        """Entities as ``(start, end_exclusive, type)``; tags must be normalised."""
        return bio_spans(self.tags)


def bio_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """Entity spans of a BIO sequence (an ``I-`` after ``O`` or another type opens a span)."""
    spans: list[tuple[int, int, str]] = []
    for i, tag in enumerate(tags):
        if tag == "O":
            continue
        prefix, etype = tag[0], tag[2:]
        if prefix == "I" and spans and spans[-1][1] == i and spans[-1][2] == etype:
            spans[-1] = (spans[-1][0], i + 1, etype)
        else:
            spans.append((i, i + 1, etype))
    return spans


def normalise_tags(tags: Sequence[str]) -> list[str]:
    """Upper-case the BIO prefix and make an entity-opening ``I-X`` ``B-X``; the type keeps its case
    (``B-Disease``) unless the whole tag is lower-case (``b-per`` -> ``B-PER``)."""
    out: list[str] = []
    for tag in tags:
        if tag.upper() == "O":
            out.append("O")
            continue
        prefix, etype = tag[0].upper(), tag[2:].upper() if tag.islower() else tag[2:]
        previous = out[-1] if out else "O"
        if prefix == "I" and (previous == "O" or previous[2:] != etype):
            prefix = "B"
        out.append(f"{prefix}-{etype}")
    return out


def tagged_sentence(tokens: Sequence[str], raw_tags: Sequence[str], path: Path | str,
                    lines: Sequence[int]) -> TaggedSentence:
    """A sentence read from ``path``, tags normalised; ``meta`` records its source and each rewritten tag
    as (position, line, tag as written), for the data check and strict scoring (:func:`tags_as_written`)."""
    normalised = normalise_tags(raw_tags)
    meta: dict = {"source": f"{path}:{lines[0]}"}
    rewritten = [(i, n, raw) for i, (n, raw, new) in enumerate(zip(lines, raw_tags, normalised)) if raw != new]
    if rewritten:
        meta["rewritten_tags"] = rewritten
    return TaggedSentence(list(tokens), normalised, meta)


def token_source(sentence: TaggedSentence, position: int) -> str:
    """``path:line`` of token ``position``; a sentence not read from a file gives its source."""
    source = sentence.meta.get("source", "?")
    path, _, line = source.rpartition(":")
    if source.startswith("hf:") or not line.isdigit():
        return source
    return f"{path}:{int(line) + position}"


def first_mentions(sentences: Iterable[TaggedSentence]) -> dict[str, str]:
    """Each entity type and where it first occurs (file:line of the entity's first word)."""
    first: dict[str, str] = {}
    for s in sentences:
        for etype, start in first_spans(s).items():
            first.setdefault(etype, token_source(s, start))
    return first


def first_spans(sentence: TaggedSentence) -> dict[str, int]:
    """Each entity type of a sentence and the position of its first word there, in reading order."""
    first: dict[str, int] = {}
    for start, _, etype in sentence.spans():
        first.setdefault(etype, start)
    return first


def tags_as_written(sentence: TaggedSentence) -> list[str]:
    """The sentence's tags as its file wrote them, before :func:`normalise_tags`."""
    tags = list(sentence.tags)
    for i, _, raw in sentence.meta.get("rewritten_tags", ()):
        tags[i] = raw
    return tags


def _detect_format(path: Path, lines: list[str]) -> str:
    """Guess the column layout from the first sentence of the file."""
    first: list[list[str]] = []
    start = 1
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            if first:
                break
            continue
        if stripped.startswith("# id") or "-DOCSTART-" in stripped:
            continue
        if not first:
            start = lineno
        first.append(split_columns(stripped))
    if not first:
        return "token_tag"
    width = len(first[0])
    if width == 4 and first[0][1:3] == ["_", "_"]:
        return "multiconer"
    if width == 2:
        return "token_tag"
    if width == 3:
        return _three_columns(path, start, first)
    raise DataError(f"{path}:{start}: cannot tell the column layout ({width} columns)")


def _counts_from(column: Sequence[str], base: int) -> bool:
    return all(value == str(i) for i, value in enumerate(column, start=base))


def _three_columns(path: Path, start: int, first: list[list[str]]) -> str:
    """``index token tag`` when the first column counts words from 0 (WikiNEuRal's CoNLL-2003) or 1
    (CoNLL-U), else ``token offset tag``; counting from 1 beside whole numbers fits both: an error."""
    ids, second = [cols[0] for cols in first], [cols[1] for cols in first]
    if _counts_from(ids, 0):
        return "index_token_tag"
    if not _counts_from(ids, 1):
        return "token_offset_tag"
    if all(value.isdecimal() for value in second):
        raise DataError(f"{path}:{start}: cannot tell the column layout: the first column counts the words "
                        f"from 1 (index, token, tag) and the second holds whole numbers (token, character "
                        f"offset, tag); give the dataset an entry in configs/datasets.yaml with "
                        f"format: index_token_tag or format: token_offset_tag")
    return "index_token_tag"


def split_columns(line: str) -> list[str]:
    return [c.strip() for c in line.split("\t")] if "\t" in line else line.split()


_COLUMNS = {"token_tag": (2, 0, 1), "index_token_tag": (3, 1, 2),
            "token_offset_tag": (3, 0, 2), "multiconer": (4, 0, 3)}


def _line_at(data: bytes, offset: int) -> int:
    """1-based number of the line holding byte ``offset``."""
    return data.count(b"\n", 0, offset) + 1


def read_text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (BOM dropped); other encodings fail with the file and line at fault."""
    data = path.read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{path}: starts with a UTF-16 byte-order mark; convert the file to UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DataError(f"{path}:{_line_at(data, nul)}: NUL byte at offset {nul}: "
                        f"binary data or UTF-16/32 text, not UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        at = err.start + bom
        raise DataError(f"{path}:{_line_at(data, at)}: not UTF-8 (byte {data[at:at + 1]!r} "
                        f"at offset {at}); convert the file to UTF-8") from None
    return split_lines(text)


def read_conll(path: str | Path, fmt: str = "auto", empty_token: str | None = None,
               allow_empty: bool = False) -> list[TaggedSentence]:
    """Read sentences from any supported layout, normalising the tags.  Only ``-DOCSTART-`` and ``# id``
    lines are skipped: any other malformed line is an error, and so are an empty token (unless
    ``empty_token`` names a stand-in) and a file with no sentence (unless ``allow_empty``)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    lines = read_text_lines(path)
    # MultiCoNER files mix `token<TAB>tag` and `token _ _ tag` lines; in auto mode either is read
    mixed = fmt == "auto" and _detect_format(path, lines) in ("token_tag", "multiconer")
    if fmt == "auto":
        fmt = _detect_format(path, lines)

    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    lines_of: list[int] = []

    def flush() -> None:
        if tokens:
            sentences.append(tagged_sentence(tokens, tags, path, lines_of))
        tokens.clear()
        tags.clear()
        lines_of.clear()

    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            flush()
            continue
        if stripped.startswith("# id") or "-DOCSTART-" in stripped.split():
            flush()
            continue
        cols = split_columns(stripped)
        if mixed:
            fmt = "multiconer" if len(cols) == 4 and cols[1:3] == ["_", "_"] else "token_tag"
        width, token_col, tag_col = _COLUMNS[fmt]
        if len(cols) != width:
            raise DataError(f"{path}:{lineno}: expected {width} columns ({fmt}), found {len(cols)}: {line!r}")
        token, tag = cols[token_col], cols[tag_col]
        if not token:
            if empty_token is None:
                raise DataError(f"{path}:{lineno}: empty token")
            log.warning("%s:%d: empty token read as %r", path, lineno, empty_token)
            token = empty_token
        if not _TAG_RE.match(tag):
            raise DataError(f"{path}:{lineno}: tag {tag!r} is not in the BIO scheme (O, B-X, I-X)")
        tokens.append(token)
        tags.append(tag)
        lines_of.append(lineno)
    flush()
    if not sentences and not allow_empty:
        what = "only -DOCSTART- or '# id' lines" if any(line.strip() for line in lines) else "an empty file"
        raise DataError(f"{path}: no sentences ({what})")
    return sentences


#: A lone combining dot above (U+0307), which the released reader drops when splitting leaves it alone.
_LONE_COMBINING_DOT = "\u0307"


def _comma_pieces(token: str) -> list[str]:
    """``umfasst,`` -> ``["umfasst", ","]``; empty pieces and lone combining dots dropped."""
    pieces = re.split(r"(,)", token)
    return [piece for piece in pieces if piece and piece != _LONE_COMBINING_DOT]


def split_at_commas(sentence: TaggedSentence) -> TaggedSentence:
    """The sentence as the released S2 reader sees it, tokens split at commas; later pieces of an entity
    token continue it as ``I-`` (``mary,`` B-PER -> ``mary`` B-PER, ``,`` I-PER)."""
    tokens: list[str] = []
    tags: list[str] = []
    for token, tag in zip(sentence.tokens, sentence.tags):
        for n, piece in enumerate(_comma_pieces(token)):
            tokens.append(piece)
            tags.append(tag if n == 0 or tag == "O" else f"I-{tag[2:]}")
    return TaggedSentence(tokens, tags, dict(sentence.meta))


def format_conll(sentences: Iterable[TaggedSentence]) -> str:
    return "".join("".join(f"{w}\t{t}\n" for w, t in zip(s.tokens, s.tags)) + "\n" for s in sentences)


def write_conll(path: str | Path, sentences: Iterable[TaggedSentence]) -> None:
    """Write ``token<TAB>tag`` lines atomically (a killed run leaves no half file)."""
    atomic_write_text(path, format_conll(sentences))


def entity_types(sentences: Iterable[TaggedSentence]) -> set[str]:
    types: set[str] = set()
    for s in sentences:
        types |= s.entity_types
    return types


def check_label_sets(splits: dict[str, Sequence[TaggedSentence]], reference: str = "train") -> list[str]:
    """The reference split's sorted label set; another split's unseen types (never predictable) fail."""
    known = entity_types(splits[reference])
    for name, sentences in splits.items():
        unseen = entity_types(sentences) - known
        if unseen:
            where = next(where for etype, where in first_mentions(sentences).items() if etype in unseen)
            raise DataError(f"{where}: split {name!r} has entity types {sorted(unseen)} "
                            f"that {reference!r} does not ({sorted(known)})")
    return sorted(known)


def type_counts(sentences: Iterable[TaggedSentence]) -> Counter:
    """Entity mentions per type."""
    return Counter(etype for s in sentences for _, _, etype in s.spans())
