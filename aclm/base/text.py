"""Words as the generators' tokenizers read them, so that checks on generated text agree with the model.

mBART-50's and XLM-R's tokenizers normalise their input (SentencePiece's ``nmt_nfkc``): NFKC folds
full-width punctuation to ASCII (``，`` -> ``,``), ``№`` to ``No``, ``km²`` to ``km2``, ``…`` to ``...``;
zero-width and replacement characters become spaces; most control characters go.  A generation decodes to
the normalised text, so a perfect copy of a Chinese sentence comes back with other characters: compared
as written, about half of them pass as new (issue 46).  :func:`normal_form` is that normalisation, written
with :mod:`unicodedata` so that S5 and S6 compare every method's text alike, tokenizer or not; it agrees
with the real tokenizer on every code point below U+3000 and every one its character map rewrites, bar
U+0344, whose two marks it orders otherwise, and those newer than Python's Unicode tables
(tests/test_real_vocab.py).
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

#: Characters ``nmt_nfkc`` turns into a space although Unicode does not call them white space.
_BLANKS = dict.fromkeys(map(ord, "\u061c\u200b\u200c\u200e\u200f\u2581\ufeff\ufffd"), " ")
#: The control characters ``nmt_nfkc`` deletes: C0 bar NUL and the white space it keeps, DEL, U+008F, U+009F.
_DROPPED = dict.fromkeys([c for c in range(1, 0x20) if not chr(c).isspace() or c in (0x0B, *range(0x1C, 0x20))]
                         + [0x7F, 0x8F, 0x9F])

#: The full-width tilde, which ``nmt_nfkc`` keeps (NFKC would make it ``~``).
_KEPT = "\uff5e"


def normal_form(tokens: Sequence[str]) -> tuple[str, ...]:
    """``tokens`` as the tokenizer normalises them, split again at white space (a token may fold into two,
    or into none)."""
    text = _KEPT.join(unicodedata.normalize("NFKC", part) for part in " ".join(tokens).split(_KEPT))
    return tuple(text.translate(_DROPPED).translate(_BLANKS).split())
