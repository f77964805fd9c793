"""What MELM reads: linearized sentences (label tokens, code-mixing markers) as sub-word ids.

Each sub-token remembers its sentence word and entity: all that masking and the word-by-word read-back need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedTokenizerBase


from aclm.base.models import load_path
from aclm.base.data import TaggedSentence
from aclm.base.tokens import add_tokens
from aclm.steps.labels import label_tokens, linearize, type_words

#: The longest input any XLM-R checkpoint takes; a tokenizer may declare less.
MAX_TOKENS = 512


@dataclass
class Seed:
    """A gold sentence or a code-mixed copy; ``source``: its gold index; ``markers``: swapped word -> language."""

    sentence: TaggedSentence
    source: int
    markers: dict[int, str] = field(default_factory=dict)

    @property
    def code_mixed(self) -> bool:
        return bool(self.markers)


@dataclass
class Encoded:
    """Sub-word ids and, per sub-token, its sentence word and entity (-1: none, as for label tokens and
    markers); ``complete`` is false when cut to fit the model."""

    input_ids: list[int]
    word: list[int]
    entity: list[int]
    complete: bool


def marker_token(language: str) -> str:
    """``de`` -> ``<de>``, lower-case like the label tokens."""
    return f"<{language.lower()}>"


def melm_words(sentence: TaggedSentence, markers: dict[int, str] | None = None) -> tuple[list[str], list[int]]:
    """The linearized words, each with the sentence word it shows (-1 for label tokens and markers)."""
    words: list[str] = []
    origin: list[int] = []
    for i, (word, tag) in enumerate(zip(sentence.tokens, sentence.tags)):
        if markers and i in markers:
            words.append(marker_token(markers[i]))
            origin.append(-1)
        words += linearize([word], [tag])
        origin += [i] if tag == "O" else [-1, i, -1]
    return words, origin


def max_tokens(tokenizer: PreTrainedTokenizerBase) -> int:
    return min(tokenizer.model_max_length, MAX_TOKENS)


def encode(sentence: TaggedSentence, tokenizer: PreTrainedTokenizerBase,
           markers: dict[int, str] | None = None) -> Encoded:
    """Tokenize word by word, so every sub-token maps back to one sentence word; cut to the model's length."""
    words, origin = melm_words(sentence, markers)
    enc = tokenizer(words, is_split_into_words=True)
    ids = enc["input_ids"]
    word = [-1 if w is None else origin[w] for w in enc.word_ids()]
    entity_of = {i: k for k, (start, end, _) in enumerate(sentence.spans()) for i in range(start, end)}
    limit = max_tokens(tokenizer)
    complete = len(ids) <= limit
    if not complete:  # keep the closing special token
        ids, word = ids[:limit - 1] + ids[-1:], word[:limit - 1] + [-1]
    entity = [entity_of.get(w, -1) for w in word]
    return Encoded(ids, word, entity, complete)


def add_markers(model, tokenizer: PreTrainedTokenizerBase, languages: Sequence[str]) -> list[str]:
    """Add a marker token per language, its embedding started at the mean embedding of the language code."""
    tokens = [marker_token(language) for language in sorted(set(languages))]
    add_tokens(model, tokenizer, tokens, {t: t[1:-1] for t in tokens})
    return tokens


def add_melm_label_tokens(model, tokenizer: PreTrainedTokenizerBase, types: Sequence[str],
                          init_words: dict) -> list[str]:
    """Add ``<b-x>``/``<i-x>`` per type, both from the type's words alone, as MELM's paper does (ACLM's
    generator adds a position word)."""
    tokens = label_tokens(types)
    add_tokens(model, tokenizer, tokens, {t: type_words(t[1:-1].split("-", 1)[1], init_words) for t in tokens})
    return tokens


def load_mlm(name: str, types: Sequence[str], init_words: dict, languages: Sequence[str] = ()):
    """The masked LM and its tokenizer, with label tokens (and language markers) in the vocabulary."""
    tokenizer = AutoTokenizer.from_pretrained(load_path(name))
    model = AutoModelForMaskedLM.from_pretrained(load_path(name))
    add_melm_label_tokens(model, tokenizer, types, dict(init_words))
    add_markers(model, tokenizer, languages)
    return model, tokenizer
