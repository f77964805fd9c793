"""An independent restatement of what the authors' released scripts decide, for tests/test_released_peer.py.

Written from reading the released S2/S5/S6 scripts, in plain steps and on
plain lists and strings, without the project's code: the peer test checks
that the project, under the ``reference_code`` settings, decides what this
module decides.  Nothing here is imported by the package.

Each function says which released step it restates.  Where the released
script writes text to a file, this module returns the lines it would write.
"""

from __future__ import annotations

import random
import re

#: The sequence markers mBART-50's decoding drops (the released pipeline decodes with skip_special_tokens).
SEQUENCE_MARKERS = ("<s>", "</s>", "<pad>", "<unk>")
#: mBART-50's language codes, also dropped by that decoding.
LANGUAGE_CODES = tuple(
    "ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT lv_LV my_MM "
    "ne_NP nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL hr_HR id_ID ka_GE km_KH "
    "mk_MK ml_IN mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES "
    "sl_SI".split())
MASK = "<mask>"


def label_tokens_of(types: list[str]) -> set[str]:
    """The generator's label tokens: ``<b-per>``, ``<i-per>``, ... (lower case)."""
    return {f"<{prefix}-{etype.lower()}>" for etype in types for prefix in "bi"}


# --------------------------------------------------------------------------- S5: decoding, validity, writing


def after_decoding(text: str) -> str:
    """What is left of a generation once the special tokens are gone (a space where each was)."""
    for marker in SEQUENCE_MARKERS:
        text = text.replace(marker, " ")
    for code in LANGUAGE_CODES:
        text = text.replace(code, " ")
    return text


def is_valid(text: str, labels: set[str]) -> bool:
    """The released validity check.

    The text is cut at single spaces.  A piece that begins with ``<`` must end
    with ``>`` and the reverse; a piece that does both must be a label token;
    and the label tokens must come in an even number.
    """
    label_count = 0
    for piece in text.split(" "):
        if not piece:
            continue
        begins, ends = piece[0] == "<", piece[-1] == ">"
        if begins != ends:
            return False
        if begins:
            if piece not in labels:
                return False
            label_count += 1
    return label_count % 2 == 0


def written_lines(text: str) -> list[str]:
    """The CoNLL lines the released script writes for a valid generation (no trailing blank line).

    Pieces are cut at single spaces.  Outside a pair each word is a line
    tagged O.  A piece starting with ``<`` opens a pair (its tag is the token
    upper-cased, without the brackets) or, when one is open, closes it: the
    words met meanwhile are written on one line, joined by spaces, with the
    opening tag.
    """
    lines: list[str] = []
    open_tag = ""
    inside: list[str] = []
    for piece in text.split(" "):
        if not piece:
            continue
        if piece[0] == "<" and open_tag:
            lines.append(" ".join(inside) + "\t" + open_tag)
            open_tag, inside = "", []
        elif piece[0] == "<":
            open_tag = piece[1:-1].upper()
        elif open_tag:
            inside.append(piece)
        else:
            lines.append(piece + "\tO")
    return lines


def s5_keep(sources: list[int], generations: list[str], types: list[str],
            remove_repetitions: bool = False) -> list[list[str] | None]:
    """For each generation, the lines written for it, or None when the released S5 loop skips it.

    With ``remove_repetitions`` (the script's default; both shell scripts pass
    False), per source, a generation whose text was already seen is skipped
    before the validity check (its text is remembered either way).
    """
    labels = label_tokens_of(types)
    seen: dict[int, set[str]] = {}
    verdicts: list[list[str] | None] = []
    for source, raw in zip(sources, generations):
        earlier = seen.setdefault(source, set())
        repeated = remove_repetitions and raw in earlier
        earlier.add(raw)
        text = after_decoding(raw)
        verdicts.append(None if repeated or not is_valid(text, labels) else written_lines(text))
    return verdicts


# --------------------------------------------------------------------------- S6: the consistency step


def as_read_back(tags: list[str]) -> list[str]:
    """Tags as the tagger library gives them back after reading a BIO column into entity spans.

    A tag starts a new entity unless it is ``I-`` right after a tag of the
    same type; every entity is written back ``B-`` then ``I-``.
    """
    out = []
    for n, tag in enumerate(tags):
        before = tags[n - 1] if n else "O"
        continues = tag.startswith("I-") and before != "O" and before[2:] == tag[2:]
        out.append(tag if tag == "O" or continues else "B-" + tag[2:])
    return out


def s6_keep(sentences: list[tuple[list[str], list[str]]], predicted: list[list[str]]) -> list[bool]:
    """The released post-processing: a generation stays when the gold tagger predicts its tags exactly,
    both as read back from spans.

    Nothing else is compared: not the source sentence, not other generations.
    """
    return [as_read_back(tags) == guess for (_, tags), guess in zip(sentences, predicted)]


# --------------------------------------------------------------------------- S3: templates


def gauss_share(count: int, rng: random.Random) -> float:
    """The share of keywords to mask: N(0.5, 1/count), drawn again until it lies in [0, 1]."""
    share = -1.0
    while share < 0 or share > 1:
        share = rng.gauss(0.5, 1 / count)
    return share


def sketch(words: list[str], tags: list[str], keyword: list[bool], rng: random.Random) -> str:
    """The released template of one (possibly mixner-concatenated) sentence.

    Entity words are wrapped in their label token; among the O words, the
    keywords (attention flag 1) are masked in a random number
    ``round(K * share)`` and every other O word is masked; a run of masks
    becomes one.
    """
    text = [f"<{tag.lower()}> {word} <{tag.lower()}>" if tag != "O" else word for word, tag in zip(words, tags)]
    keywords = [i for i, tag in enumerate(tags) if tag == "O" and keyword[i]]
    others = [i for i, tag in enumerate(tags) if tag == "O" and not keyword[i]]
    how_many = round(len(keywords) * gauss_share(len(keywords), rng)) if keywords else 0
    for i in rng.sample(keywords, how_many) + others:
        text[i] = MASK
    merged: list[str] = []
    for piece in text:
        if not (piece == MASK and merged and merged[-1].endswith(MASK)):
            merged.append(piece)
    return " ".join(merged)


# --------------------------------------------------------------------------- S2: the reader


def split_token(token: str, tag: str) -> list[tuple[str, str]]:
    """The released S2 reader on one line: the token cut around each comma, kept commas included.

    Empty pieces and a lone combining dot above are dropped; the first piece
    has the line's tag, the later ones ``O`` if it is ``O`` and ``I-<type>``
    otherwise.
    """
    pieces = [p for p in re.split("(,)", token) if p and p != "\u0307"]
    return [(p, tag if n == 0 or tag == "O" else "I" + tag[1:]) for n, p in enumerate(pieces)]
