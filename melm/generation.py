"""Generate with the fine-tuned masked LM: re-mask entity tokens, fill them from the top-k (SPEC §3).

Each entity of n sub-tokens gets a share ε ~ N(0.5, σ = 1/n) masked, each filled uniformly from the
``top_k`` predictions (special and label tokens excluded). The unit is the whole entity, as paper and SPEC
say; the released code draws per entity word, and from ranks 2 to k only. Filling is in place, so words
and tags keep their count; the result still goes through :func:`aclm.steps.labels.parse_generation`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from aclm.base.augmentation import kept_row
from aclm.base.data import TaggedSentence
from aclm.base.text import normal_form
from aclm.steps import screening
from aclm.steps.labels import linearize, parse_generation
from aclm.steps.screening import MalformedGeneration
from melm.encoding import Encoded, Seed


@dataclass
class Job:
    """One generation attempt: which seed sentence, which round, and the sub-token positions masked."""

    seed_index: int
    round: int
    masked: list[int]


def entity_mask_share(n: int, rng: random.Random) -> float:
    """ε ~ N(0.5, σ = 1/n), redrawn until 0 ≤ ε ≤ 1 and round(ε·n) ≥ 1: the released code's N(n/2, 1) on the
    count as a share, and like it every entity gets at least one token masked."""
    while True:
        eps = rng.gauss(0.5, 1.0 / n)
        if 0.0 <= eps <= 1.0 and round(eps * n) >= 1:
            return eps


def mask_positions(entity: Sequence[int], rng: random.Random) -> list[int]:
    """round(ε·n) of the n sub-tokens of each entity, chosen at random (Python's round: half to even)."""
    groups: dict[int, list[int]] = {}
    for position, k in enumerate(entity):
        if k >= 0:
            groups.setdefault(k, []).append(position)
    chosen: list[int] = []
    for positions in groups.values():
        chosen += rng.sample(positions, round(entity_mask_share(len(positions), rng) * len(positions)))
    return sorted(chosen)


def plan_jobs(encoded: Sequence[Encoded], rounds: int, seed: int) -> list[Job]:
    """Masks for every round of every complete seed with an entity; each draw seeded by (seed, sentence, round)."""
    return [Job(i, r, mask_positions(enc.entity, random.Random(f"{seed}:melm:{i}:{r}")))
            for i, enc in enumerate(encoded) if enc.complete and any(k >= 0 for k in enc.entity)
            for r in range(rounds)]


def lm_head(model) -> torch.nn.Module:
    """A masked LM's head (hidden states -> vocabulary logits): XLM-R's ``lm_head``, BERT's ``cls``."""
    for name in ("lm_head", "cls"):
        if hasattr(model, name):
            return getattr(model, name)
    raise TypeError(f"{type(model).__name__} has no masked-LM head named lm_head or cls")


@torch.inference_mode()
def fill(model, ids: torch.Tensor, attention: torch.Tensor, masked: torch.Tensor, mask_id: int,
         banned: torch.Tensor, top_k: int, generator: torch.Generator) -> torch.Tensor:
    """``ids`` with every ``masked`` position a uniform draw from the top-k, ``banned`` ids excluded; only
    masked positions go through the 250k-wide LM head."""
    hidden = model.base_model(input_ids=ids.masked_fill(masked, mask_id), attention_mask=attention)[0]
    logits = lm_head(model)(hidden[masked]).float()
    logits = logits.index_fill(1, banned, float("-inf"))
    top = logits.topk(top_k, dim=-1).indices
    pick = torch.randint(top_k, (len(top), 1), generator=generator).to(top.device)
    out = ids.clone()
    out[masked] = top.gather(1, pick).squeeze(1)
    return out


def fill_jobs(model, tokenizer: PreTrainedTokenizerBase, encoded: Sequence[Encoded], jobs: Sequence[Job],
              top_k: int, batch_size: int, seed: int, device: torch.device) -> list[list[int]]:
    """The filled ids of every job, batched longest first; one seeded generator for all draws."""
    generator = torch.Generator().manual_seed(seed)
    banned = torch.tensor(sorted(set(tokenizer.all_special_ids)), device=device)
    order = sorted(range(len(jobs)), key=lambda j: -len(encoded[jobs[j].seed_index].input_ids))
    outputs: list[list[int]] = [[] for _ in jobs]
    model.eval().to(device)
    for start in tqdm(range(0, len(order), batch_size), desc="MELM fill", unit="batch"):
        batch = order[start:start + batch_size]
        rows = [torch.tensor(encoded[jobs[j].seed_index].input_ids) for j in batch]
        ids = pad_sequence(rows, batch_first=True, padding_value=tokenizer.pad_token_id).to(device)
        attention = pad_sequence([torch.ones_like(r) for r in rows], batch_first=True).to(device)
        masked = torch.zeros_like(ids, dtype=torch.bool)
        for row, j in enumerate(batch):
            masked[row, jobs[j].masked] = True
        filled = fill(model, ids, attention, masked, tokenizer.mask_token_id, banned, top_k, generator).tolist()
        for row, j in enumerate(batch):
            outputs[j] = filled[row][:len(rows[row])]
    return outputs


def rebuild_words(sentence: TaggedSentence, enc: Encoded, ids: Sequence[int], masked: Sequence[int],
                  tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """The sentence's words, each word with a filled sub-token rebuilt from its sub-tokens (spaces removed)."""
    words = list(sentence.tokens)
    for w in sorted({enc.word[p] for p in masked}):
        pieces = [i for i, owner in zip(ids, enc.word) if owner == w]
        words[w] = "".join(tokenizer.convert_tokens_to_string(tokenizer.convert_ids_to_tokens(pieces)).split())
    return words


def read_back(seed: Seed, enc: Encoded, ids: Sequence[int], masked: Sequence[int],
              tokenizer: PreTrainedTokenizerBase, types: Sequence[str]) -> TaggedSentence:
    """The generated sentence, parsed like any generation; :class:`MalformedGeneration` if it is not one."""
    words = rebuild_words(seed.sentence, enc, ids, masked, tokenizer)
    parsed = parse_generation(" ".join(linearize(words, seed.sentence.tags)), types, tokenizer.mask_token)
    if parsed.tags != seed.sentence.tags:
        raise MalformedGeneration("tags_changed", f"{parsed.tags} != {seed.sentence.tags}")
    return parsed


def read_all(seeds: Sequence[Seed], encoded: Sequence[Encoded], jobs: Sequence[Job], filled: Sequence[list[int]],
             tokenizer: PreTrainedTokenizerBase, types: Sequence[str]) -> list[TaggedSentence | MalformedGeneration]:
    """:func:`read_back` for every job; a malformed generation is returned, not raised, to be counted."""
    out: list[TaggedSentence | MalformedGeneration] = []
    for job, ids in zip(jobs, filled):
        try:
            out.append(read_back(seeds[job.seed_index], encoded[job.seed_index], ids, job.masked, tokenizer, types))
        except MalformedGeneration as err:
            out.append(err)
    return out


def screen(seeds: Sequence[Seed], gold: Sequence[TaggedSentence], jobs: Sequence[Job],
           generated: Sequence[TaggedSentence | MalformedGeneration]) -> tuple[list[dict], dict[str, int]]:
    """Kept rows after :func:`aclm.steps.screening.screen`; a copy of the seed or its gold source is ``copy``."""
    job_seeds = [seeds[job.seed_index] for job in jobs]

    def is_copy(i: int, result: TaggedSentence) -> bool:
        return normal_form(result.tokens) in (normal_form(job_seeds[i].sentence.tokens),
                                              normal_form(gold[job_seeds[i].source].tokens))

    screened, counts = screening.screen([seed.source for seed in job_seeds], generated, is_copy=is_copy)
    rows = [kept_row(verdict.sentence, [seed.source], round=job.round, code_mixed=seed.code_mixed)
            for job, seed, verdict in zip(jobs, job_seeds, screened) if verdict.status == screening.KEPT]
    return rows, counts
