"""Words as the generators' tokenizers normalise them (SentencePiece ``nmt_nfkc``), for copy checks.

Generations decode to normalised text (``，`` -> ``,``): compared as written, about half the exact Chinese
copies passed as new (issue 46; docs/languages.md). Matches the real tokenizer below U+3000 and on its
character map, bar U+0344 and code points newer than Python's tables (tests/test_real_vocab.py).
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
    """``tokens`` normalised and split again at white space (a token may become two, or none)."""
    text = _KEPT.join(unicodedata.normalize("NFKC", part) for part in " ".join(tokens).split(_KEPT))
    return tuple(text.translate(_DROPPED).translate(_BLANKS).split())
