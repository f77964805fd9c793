"""Perplexity of augmentations under a causal LM (ACLM Table 3: GPT-2).

The paper does not say how sentences are pooled; we read it per augmentation: ``mode="sentence"`` is the mean
over sentences of exp(mean token NLL), ``mode="corpus"`` exp(total NLL / total tokens), which weights long
sentences more.  Each sentence is scored after the model's BOS token (so its first word counts), cut to the
context length, in padded batches with an attention mask so that its score does not depend on its batch.
transformers loads with the model: a table without perplexity never needs it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import torch

from aclm.base.models import load_path

MODES = ("sentence", "corpus")


@lru_cache(maxsize=2)
def load_lm(name: str, device: str) -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(load_path(name))
    model = AutoModelForCausalLM.from_pretrained(load_path(name)).to(device).eval()
    return tokenizer, model


def token_nlls(texts: Sequence[str], model_name: str, batch_size: int = 32,
               device: str | None = None) -> list[tuple[float, int]]:
    """(summed NLL in nats, number of scored tokens) per text, in input order."""
    if device in (None, "auto"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer, model = load_lm(model_name, device)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    limit = getattr(model.config, "n_positions", None) or tokenizer.model_max_length
    encoded = [[bos] + tokenizer(t, add_special_tokens=False)["input_ids"][: limit - 1] for t in texts]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[tuple[float, int]] = [(0.0, 0)] * len(encoded)
    for start in range(0, len(order), batch_size):
        batch = [encoded[i] for i in order[start:start + batch_size]]
        width = max(len(ids) for ids in batch)
        ids = torch.tensor([x + [bos] * (width - len(x)) for x in batch], device=device)
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in batch], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        nll = nll * mask[:, 1:]
        for row, i in enumerate(order[start:start + batch_size]):
            out[i] = (nll[row].sum().item(), int(mask[row, 1:].sum().item()))
    return out


def perplexity(texts: Sequence[str], model_name: str, batch_size: int = 32, device: str | None = None,
               mode: str = "sentence") -> float | None:
    """Perplexity of ``texts`` pooled as ``mode`` says; None when nothing can be scored."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: choose from {MODES}")
    scored = [(s, n) for s, n in token_nlls(texts, model_name, batch_size, device) if n > 0]
    if not scored:
        return None
    if mode == "corpus":
        return math.exp(sum(s for s, _ in scored) / sum(n for _, n in scored))
    return sum(math.exp(s / n) for s, n in scored) / len(scored)
