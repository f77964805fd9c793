"""Multilingual MELM's code-mixing: swap an entity for its nearest same-type entity of another language.

Per sentence with an entity that has a same-type match in another language, one of those languages is drawn
uniformly, then one entity is replaced by its most similar same-type mention there (MELM §2.5). A marker
(``<de>``) precedes each swapped word, as MELM's released code writes it, in the linearized input only.
Similarity: cosine of multilingual Sentence-BERT embeddings (``generation.mixner.embedder``), standing in for
the paper's MUSE bilingual embeddings. A mention spelled like the entity it would replace (case aside) is
never chosen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
from omegaconf import DictConfig
from torch.nn import functional as F


from aclm.base.models import load_path
from aclm.base.data import TaggedSentence
from melm.encoding import Seed

Embed = Callable[[list[str]], torch.Tensor]


@dataclass(frozen=True)
class Mention:
    words: tuple[str, ...]
    type: str
    language: str

    @property
    def text(self) -> str:
        return " ".join(self.words)


def foreign_mentions(pool: Mapping[str, Sequence[TaggedSentence]]) -> list[Mention]:
    """Every distinct (words, type) entity mention of each language, in a fixed order."""
    seen = dict.fromkeys(Mention(tuple(s.tokens[a:b]), etype, language)
                         for language in sorted(pool) for s in pool[language] for a, b, etype in s.spans())
    return list(seen)


def nearest_same_type(queries: torch.Tensor, query_types: Sequence[str], candidates: torch.Tensor,
                      candidate_types: Sequence[str], forbidden: torch.Tensor | None = None) -> torch.Tensor:
    """For each query, the most cosine-similar candidate of its type not ``forbidden`` (-1: none)."""
    type_id = {t: i for i, t in enumerate(sorted({*query_types, *candidate_types}))}
    q_types = torch.tensor([type_id[t] for t in query_types])
    c_types = torch.tensor([type_id[t] for t in candidate_types])
    allowed = q_types[:, None] == c_types[None, :]
    if forbidden is not None:
        allowed &= ~forbidden
    sims = F.normalize(queries.float(), dim=-1) @ F.normalize(candidates.float(), dim=-1).T
    best = sims.masked_fill(~allowed, float("-inf")).argmax(dim=1)
    return torch.where(allowed.any(dim=1), best, torch.full_like(best, -1))


def swap(sentence: TaggedSentence, source: int, start: int, end: int, mention: Mention) -> Seed:
    """The sentence with words ``start:end`` replaced by ``mention``, each new word marked with its language."""
    tags = [f"B-{mention.type}"] + [f"I-{mention.type}"] * (len(mention.words) - 1)
    return Seed(TaggedSentence(sentence.tokens[:start] + list(mention.words) + sentence.tokens[end:],
                               sentence.tags[:start] + tags + sentence.tags[end:]),
                source, {start + k: mention.language for k in range(len(mention.words))})


def code_mix(train: Sequence[TaggedSentence], pool: Mapping[str, Sequence[TaggedSentence]], embed: Embed,
             seed: int) -> list[Seed]:
    """One code-mixed copy of every sentence that has an entity with a same-type foreign match."""
    foreign = foreign_mentions(pool)
    local = [(i, a, b, etype) for i, s in enumerate(train) for a, b, etype in s.spans()]
    if not foreign or not local:
        return []
    local_texts = [" ".join(train[i].tokens[a:b]) for i, a, b, _ in local]
    text_id: dict[str, int] = {}
    local_ids = torch.tensor([text_id.setdefault(t.lower(), len(text_id)) for t in local_texts])
    foreign_ids = torch.tensor([text_id.setdefault(m.text.lower(), len(text_id)) for m in foreign])
    local_emb, foreign_emb = embed(local_texts), embed([m.text for m in foreign])
    # options[i][language]: (start, end, nearest same-type mention in that language) for each entity of sentence i
    options: dict[int, dict[str, list[tuple[int, int, Mention]]]] = {}
    for language in sorted({m.language for m in foreign}):
        within = torch.tensor([j for j, m in enumerate(foreign) if m.language == language])
        best = nearest_same_type(local_emb, [t for *_, t in local], foreign_emb[within],
                                 [foreign[j].type for j in within.tolist()],
                                 local_ids[:, None] == foreign_ids[within][None, :]).tolist()
        for (i, a, b, _), j in zip(local, best):
            if j >= 0:
                options.setdefault(i, {}).setdefault(language, []).append((a, b, foreign[within[j]]))
    mixed = []
    for i in sorted(options):
        rng = random.Random(f"{seed}:codemix:{i}")
        language = rng.choice(sorted(options[i]))      # the target language first, uniformly
        mixed.append(swap(train[i], i, *rng.choice(options[i][language])))
    return mixed


def sbert_embedder(cfg: DictConfig, device: torch.device) -> Embed:
    """Normalised multilingual Sentence-BERT embeddings (the configured mixner embedder), on the CPU."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(load_path(cfg.generation.mixner.embedder), device=str(device))
    return lambda texts: model.encode(texts, batch_size=cfg.generation.mixner.batch_size, convert_to_tensor=True,
                                      normalize_embeddings=True, show_progress_bar=False).cpu()
