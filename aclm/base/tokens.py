"""Adding whole tokens (label tokens, MELM's language markers, MulDA's tag words) to a vocabulary.

Added as *additional special tokens*: matched before sub-word tokenization, so never split, and they
absorb surrounding spaces (no stray ``▁``). Embeddings may start from words naming the token (SPEC §2 S3).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from transformers import EncoderDecoderModel, PreTrainedTokenizerBase


def add_tokens(model, tokenizer: PreTrainedTokenizerBase, tokens: Sequence[str],
               init_words: Mapping[str, str] | None = None) -> list[str]:
    """Add the ``tokens`` the tokenizer lacks and return them; a new token in ``init_words`` starts at the
    mean embedding of those words' sub-tokens.  A matrix with spare rows is never shrunk."""
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
    """Modules whose embeddings a new token joins (an ``EncoderDecoderModel`` cannot resize as a whole)."""
    if isinstance(model, EncoderDecoderModel):
        return [model.encoder, model.decoder]
    return [model]
