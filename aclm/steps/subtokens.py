"""Words from sub-tokens, a whole batch at once (a speed patch for flair 0.15).

flair's ``combine_strided_tensors`` and ``fill_masked_elements`` loop over sentences, each waiting for the
GPU (a 64-sentence batch stalls the CPU 128 times). :func:`batched_subtokens` does one indexing for the
batch when every sentence fits one window and every word has a sub-token, else falls back to flair.
Values are copied, never computed: bitwise flair's (tests/test_tagger_cost.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator
from unittest.mock import patch

import torch
from flair.embeddings import transformer

FLAIR_COMBINE = transformer.combine_strided_tensors
FLAIR_FILL = transformer.fill_masked_elements


def combine_windows(hidden_states: torch.Tensor, overflow_to_sample_mapping: torch.Tensor, half_stride: int,
                    max_length: int, default_value: int) -> torch.Tensor:
    """flair's ``combine_strided_tensors``, one copy for the batch when no sentence spans windows."""
    sentences = overflow_to_sample_mapping.numel()
    if sentences == 0 or int(overflow_to_sample_mapping[-1]) + 1 != sentences:   # a sentence spans windows
        return FLAIR_COMBINE(hidden_states, overflow_to_sample_mapping, half_stride, max_length, default_value)
    combined = hidden_states.new_full((sentences, max_length, *hidden_states.shape[2:]), default_value)
    combined[:, :hidden_states.shape[1]] = hidden_states
    return combined


def fill_words(all_token_embeddings: torch.Tensor, sentence_hidden_states: torch.Tensor, mask: torch.Tensor,
               word_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """flair's ``fill_masked_elements``, one scatter for the batch when every word has its sub-token."""
    keep = mask & (word_ids >= 0)
    if not torch.equal(keep.sum(dim=1), lengths.to(keep.device)):   # a word without sub-tokens: flair's zeros
        return FLAIR_FILL(all_token_embeddings, sentence_hidden_states, mask, word_ids, lengths)
    rows, columns = keep.nonzero(as_tuple=True)
    words = keep.cumsum(dim=1)[rows, columns] - 1
    all_token_embeddings[rows, words] = sentence_hidden_states[rows, columns]
    return all_token_embeddings


@contextmanager
def batched_subtokens() -> Iterator[None]:
    """flair's embeddings use :func:`combine_windows` and :func:`fill_words` inside the block."""
    with patch.multiple(transformer, combine_strided_tensors=combine_windows, fill_masked_elements=fill_words):
        yield
