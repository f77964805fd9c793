"""Adding whole tokens to a pretrained model's vocabulary: the one helper every method uses.

ACLM's generator and MELM's masked LM add the label tokens (``<b-per>``),
MELM its language markers (``<de>``), MulDA the tag words of its
linearization (``B-PER``).  Each is added as an *additional special token*:
those are matched before the sub-word tokenizer runs, so a token is never
split, and they absorb the spaces around them (no stray ``▁`` piece before
them).  A new token's input embedding can start from words that say what it
means (a label token from the words that name its type, a marker from its
language code) instead of the resize's default.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from transformers import EncoderDecoderModel, PreTrainedTokenizerBase


def add_tokens(model, tokenizer: PreTrainedTokenizerBase, tokens: Sequence[str],
               init_words: Mapping[str, str] | None = None) -> list[str]:
    """Add the ``tokens`` the tokenizer lacks and return them (in the order given).

    They join as additional special tokens next to the tokenizer's existing
    ones (none is replaced), and the model's embeddings are resized once.
    A new token named in ``init_words`` starts with its input embedding at the
    mean input embedding of the sub-tokens of those words (tokenized without
    special tokens); one without init words, or whose words tokenize to
    nothing, keeps the embedding the resize gave it.  Tokens already in the
    vocabulary are left exactly as they are.  A model whose embedding matrix
    has more rows than the tokenizer has tokens (padded vocabularies, the
    paper-shape stand-ins) keeps its size: the new ids fall in the spare rows.
    """
    vocab = tokenizer.get_vocab()
    new = [t for t in dict.fromkeys(tokens) if t not in vocab]
    if not new:
        return []
    tokenizer.add_special_tokens({"additional_special_tokens": new}, replace_additional_special_tokens=False)
    init_words = init_words or {}
    for part in embedding_owners(model):
        if len(tokenizer) > part.get_input_embeddings().num_embeddings:  # never shrink a matrix with spare rows
            part.resize_token_embeddings(len(tokenizer))
        embeddings = part.get_input_embeddings().weight
        with torch.no_grad():
            for token in new:
                if token not in init_words:
                    continue
                ids = tokenizer(init_words[token], add_special_tokens=False)["input_ids"]
                if ids:
                    embeddings[tokenizer.convert_tokens_to_ids(token)] = embeddings[ids].mean(dim=0)
    return new


def embedding_owners(model) -> list:
    """The modules whose word embeddings a new token joins: the model itself, or, for an ``EncoderDecoderModel``
    (which cannot resize its embeddings as a whole), its encoder and its decoder, each with a matrix of its own."""
    if isinstance(model, EncoderDecoderModel):
        return [model.encoder, model.decoder]
    return [model]
