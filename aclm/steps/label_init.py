"""The released S4's first embeddings of the label tokens (``generator.label_init: released``).

The released script (``src/bart_pretrain_dynamic_multilingual.py``) adds the 12 tokens in a set
difference's order, which changes with the unset ``PYTHONHASHSEED``; new rows are N(0, 0.02²) plus twice
a fixed id's embedding (encoder and decoder share one tensor). Here ``PYTHONHASHSEED`` and the draw use
the run's seed: repeatable, and seeds spread over the released orders (docs/reference-code.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from aclm.steps.labels import label_tokens

#: The vocabulary ids whose embeddings the released script adds to rows -1 ... -6, and again to -7 ... -12.
RELEASED_IDS = (57877, 30816, 87632, 51588, 85403, 216487)
#: The tokens its list names (line 59), the only ones the rule is written for.
RELEASED_TOKENS = frozenset(label_tokens(["CORP", "CW", "GRP", "LOC", "PER", "PROD"]))
INIT_STD = 0.02

# Against a set over a quarter of its size, a set difference iterates the left set into a new one (as line 62
# against the 250k vocabulary): the order depends only on the tokens' hashes.
_ORDER = "import json, sys; print(json.dumps(list(set(json.loads(sys.argv[1])) - {'a', 'b', 'c', 'd'})))"


def released_order(tokens: Sequence[str], seed: int) -> list[str]:
    """The order line 62 gives ``tokens`` in a Python whose hash seed is ``seed``."""
    found = subprocess.run([sys.executable, "-c", _ORDER, json.dumps(list(tokens))], capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)})
    return json.loads(found.stdout)


def add_released(model, tokenizer: PreTrainedTokenizerBase, types: Sequence[str], seed: int) -> list[str]:
    """Add the label tokens as the released S4 does; returns them in :func:`label_tokens` order."""
    tokens = label_tokens(types)
    if set(tokens) != RELEASED_TOKENS:
        raise ValueError(f"generator.label_init=released is written for MultiCoNER's 12 label tokens; this "
                         f"dataset's are {tokens} (use generator.label_init=words)")
    order = released_order(tokens, seed)
    tokenizer.add_special_tokens({"additional_special_tokens": order}, replace_additional_special_tokens=False)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    weight = model.get_input_embeddings().weight
    if weight.shape[0] <= max(RELEASED_IDS):
        raise ValueError(f"generator.label_init=released adds the embeddings of mBART-50's ids {RELEASED_IDS}; "
                         f"this generator has {weight.shape[0]:,} rows")
    rows = tokenizer.convert_tokens_to_ids(order)
    drawn = torch.randn(len(rows), weight.shape[1], generator=torch.Generator().manual_seed(seed)) * INIT_STD
    with torch.no_grad():
        for k in range(1, len(rows) + 1):
            weight[rows[-k]] = drawn[-k].to(weight) + 2 * weight[RELEASED_IDS[(k - 1) % len(RELEASED_IDS)]]
    return tokens
