"""S2: choose, for every training sentence, the context words its entities attend to.

The S1 tagger's transformer is run with attentions on; the maps of the chosen
layers are summed over heads and layers, brought from sub-tokens to words (a
word *receives* the sum over its sub-tokens and *gives* the mean over them) and
then from words to entities by the same rule.  Each entity keeps the
``k = ceil(p * non-entity words)`` candidate words it attends to most; a
sentence's keywords are the union over its entities.  The ACLM-random and
ACLM-only-entity variants replace that choice by a random one or by none.
"""

from __future__ import annotations

import logging
import math
import random
import unicodedata
from collections import Counter
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import stopwordsiso
import torch
from tqdm.auto import tqdm

from aclm.config import KeywordConfig
from aclm.data import TaggedSentence, bio_spans

log = logging.getLogger(__name__)

SELECTIONS = ("attention", "random", "none")
WordIds = Sequence[Optional[int]]


class AttentionUnavailable(RuntimeError):
    """The model returned no attention maps: every sentence would fail the same way."""


# --------------------------------------------------------------------------- candidates


def stopwords(language: str) -> frozenset[str]:
    """Lower-cased stop words of ``language`` from the offline stopwords-iso lists.

    An unknown language gets an empty list (and a warning) rather than an
    error, so a new dataset still runs; its keywords may then be stop words.
    """
    if not stopwordsiso.has_lang(language):
        log.warning("no stop-word list for language %r: stop words stay keyword candidates", language)
        return frozenset()
    return frozenset(w.lower() for w in stopwordsiso.stopwords(language))


def is_punctuation(word: str) -> bool:
    """True when every character is punctuation or a symbol (Unicode P* or S*)."""
    return all(unicodedata.category(ch)[0] in "PS" for ch in word)


def candidates(tokens: Sequence[str], tags: Sequence[str], stop: frozenset[str]) -> list[bool]:
    """Which words may become keywords: outside entities, not punctuation, not stop words."""
    return [tag == "O" and not is_punctuation(word) and word.lower() not in stop
            for word, tag in zip(tokens, tags)]


def keyword_count(p: float, tags: Sequence[str], cand_mask: Sequence[bool]) -> int:
    """``k = ceil(p * non-entity words)``, at most the number of candidates.

    The product is rounded to 9 decimals first so float noise cannot add a
    keyword (0.28 * 25 is 7.000000000000001 in floating point, k must be 7).
    """
    non_entity = sum(tag == "O" for tag in tags)
    return min(math.ceil(round(p * non_entity, 9)), sum(cand_mask))


# --------------------------------------------------------------------------- attention maps


def layer_indices(spec: str, num_layers: int) -> list[int]:
    """Layers named by ``last1``, ``last4``, ``all`` or an inclusive 0-based range ``"8-11"``."""
    named = {"last1": num_layers - 1, "last4": num_layers - 4, "all": 0}
    if spec in named:
        first, last = named[spec], num_layers - 1
    else:
        try:
            first, last = (int(part) for part in str(spec).split("-"))
        except ValueError:
            raise ValueError(f"layers={spec!r}: use last1, last4, all or a range like 8-11") from None
    if not 0 <= first <= last < num_layers:
        raise ValueError(f"layers={spec!r} does not fit a model with {num_layers} layers")
    return list(range(first, last + 1))


def _as_group_ids(ids: WordIds | torch.Tensor) -> torch.Tensor:
    """Group ids as a tensor, with -1 for ungrouped positions (special tokens, padding)."""
    if isinstance(ids, torch.Tensor):
        return ids
    return torch.tensor([-1 if i is None else i for i in ids], dtype=torch.long)


def collapse(attn: torch.Tensor, groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Merge positions into groups: a group gives the mean of its rows and receives the sum of its columns.

    ``attn`` is ``[..., T, T]`` and ``groups`` ``[..., T]`` (-1: dropped); the
    result is ``[..., G, G]``.  Summing the columns keeps the attention a word
    receives independent of how finely it is split; averaging the rows keeps
    the attention it gives a distribution of the same total as one token's.
    An empty group has zero rows and columns.
    """
    assign = (groups.unsqueeze(-1) == torch.arange(num_groups, device=groups.device)).to(attn.dtype)
    sizes = assign.sum(dim=-2, keepdim=True).clamp(min=1)
    return (assign / sizes).transpose(-1, -2) @ attn @ assign


def word_attention(attn: torch.Tensor, word_ids: WordIds | torch.Tensor, num_words: int) -> torch.Tensor:
    """Word-level attention ``[..., num_words, num_words]`` from a sub-token map.

    ``word_ids`` is a fast tokenizer's ``word_ids()`` (``None`` for special
    tokens, which are dropped) or a tensor of them with -1 in those places.
    """
    return collapse(attn, _as_group_ids(word_ids).to(attn.device), num_words)


def entity_attention(word_attn: torch.Tensor, tags: Sequence[str]) -> torch.Tensor:
    """Attention each entity gives to each word, ``[entities, words]``.

    Every entity becomes one node by :func:`collapse`: its row is the mean of
    its words' rows (the attention it gives) and its column the sum of its
    words' columns (the attention it receives, which is what an entity-to-
    entity score reads).  Self-attention is zeroed, so an entity never scores
    its own words.  Non-entity words stay nodes of their own.
    """
    spans = bio_spans(tags)
    n = len(tags)
    nodes = torch.arange(n) + len(spans)
    for e, (start, end, _) in enumerate(spans):
        nodes[start:end] = e
    merged = collapse(word_attn, nodes.to(word_attn.device), len(spans) + n)
    merged.fill_diagonal_(0)
    return merged[: len(spans)][:, nodes.to(word_attn.device)]


# --------------------------------------------------------------------------- selection


def _candidate_indices(cand_mask: Sequence[bool]) -> list[int]:
    return [i for i, ok in enumerate(cand_mask) if ok]


def select_by_attention(word_attn: torch.Tensor, tags: Sequence[str], cand_mask: Sequence[bool],
                        p: float) -> list[int]:
    """ACLM: each entity's top-k candidates by the attention it gives them; union, sorted.

    Ties go to the earlier word (a stable sort over candidates in order).
    """
    k = keyword_count(p, tags, cand_mask)
    if k == 0 or not bio_spans(tags):
        return []
    cand = torch.tensor(_candidate_indices(cand_mask), dtype=torch.long)
    scores = entity_attention(word_attn, tags)[:, cand.to(word_attn.device)].cpu()
    top = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]
    return sorted(set(cand[top].flatten().tolist()))


def select_random(tags: Sequence[str], cand_mask: Sequence[bool], p: float, rng: random.Random) -> list[int]:
    """ACLM random: each entity draws k candidates uniformly; union, sorted."""
    k = keyword_count(p, tags, cand_mask)
    cand = _candidate_indices(cand_mask)
    return sorted({i for _ in bio_spans(tags) for i in rng.sample(cand, k)})


def select_none() -> list[int]:
    """ACLM only entity: templates keep the entities alone."""
    return []


def select(selection: str, tags: Sequence[str], cand_mask: Sequence[bool], p: float,
           word_attn: Optional[torch.Tensor] = None, rng: Optional[random.Random] = None) -> list[int]:
    """Dispatch on ``keywords.selection`` (attention needs ``word_attn``, random needs ``rng``)."""
    if selection == "attention":
        return select_by_attention(word_attn, tags, cand_mask, p)
    if selection == "random":
        return select_random(tags, cand_mask, p, rng)
    if selection == "none":
        return select_none()
    raise ValueError(f"keywords.selection={selection!r} is not one of {SELECTIONS}")


# --------------------------------------------------------------------------- batched extraction


def subtoken_limit(cfg_limit: int, tokenizer) -> int:
    """The configured limit, lowered to what the tokenizer says the model accepts."""
    model_limit = getattr(tokenizer, "model_max_length", None)
    if model_limit is None or model_limit > 1_000_000:  # transformers' "no limit" sentinel
        return cfg_limit
    return min(cfg_limit, model_limit)


@contextmanager
def _attention_mode(model) -> Iterator[None]:
    """Evaluation mode with eager attention (the only kind that returns maps); restored afterwards.

    Models on transformers' attention interface are switched to ``eager``;
    older ones (XLM-R in 4.57) fall back to eager by themselves whenever
    ``output_attentions=True``.
    """
    was_training = model.training
    previous = model.config._attn_implementation
    switch = previous != "eager" and model._can_set_attn_implementation()
    if switch:
        model.set_attn_implementation("eager")
    model.eval()
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(previous)
        model.train(was_training)


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), value, dtype=torch.long)
    for b, row in enumerate(rows):
        out[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def _forward(model, input_ids: list[list[int]], word_ids: list[WordIds], num_words: list[int],
             layers: list[int], pad_id: int, device) -> list[torch.Tensor]:
    """One padded forward pass; the word-level map of each sentence, on the CPU."""
    ids = _pad(input_ids, pad_id).to(device)
    mask = _pad([[1] * len(row) for row in input_ids], 0).to(device)
    groups = _pad([_as_group_ids(w).tolist() for w in word_ids], -1).to(device)
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        if not out.attentions or out.attentions[0] is None:
            raise AttentionUnavailable(f"{type(model).__name__} returned no attention maps; "
                                       "load it with attn_implementation='eager'")
        attn = torch.stack([out.attentions[i] for i in layers]).float().sum(dim=(0, 2))
        words = word_attention(attn, groups, max(num_words)).cpu()
    return [words[b, :n, :n] for b, n in enumerate(num_words)]


def _safe_forward(model, enc, batch: list[int], num_words: list[int], layers: list[int],
                  pad_id: int, device) -> list[tuple[int, Optional[torch.Tensor]]]:
    """Forward a batch; if it fails, retry its sentences one by one and give up only on those that fail alone."""
    try:
        mats = _forward(model, [enc["input_ids"][i] for i in batch], [enc.word_ids(i) for i in batch],
                        [num_words[i] for i in batch], layers, pad_id, device)
        return list(zip(batch, mats))
    except AttentionUnavailable:
        raise
    except Exception as err:  # one bad sentence (or an out-of-memory batch) must not stop S2
        if len(batch) == 1:
            log.warning("sentence %d gets no keywords: %s: %s", batch[0], type(err).__name__, err)
            return [(batch[0], None)]
        return [r for i in batch for r in _safe_forward(model, enc, [i], num_words, layers, pad_id, device)]


def _word_attentions(model, tokenizer, sentences: Sequence[TaggedSentence], todo: list[int],
                     cfg: KeywordConfig, device) -> Iterator[tuple[int, Optional[torch.Tensor], str]]:
    """``(index, word map or None, status)`` for every sentence in ``todo``, batched by length."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("keyword extraction needs a fast tokenizer (for word_ids)")
    layers = layer_indices(cfg.layers, model.config.num_hidden_layers)
    limit = subtoken_limit(cfg.max_subtokens, tokenizer)
    enc = tokenizer([sentences[i].tokens for i in todo], is_split_into_words=True)
    fits = []
    for j, i in enumerate(todo):
        if len(enc["input_ids"][j]) > limit:
            yield i, None, "too_long"
        else:
            fits.append(j)
    fits.sort(key=lambda j: len(enc["input_ids"][j]))  # similar lengths together: less padding
    batches = [fits[b: b + cfg.batch_size] for b in range(0, len(fits), cfg.batch_size)]
    num_words = [len(sentences[i]) for i in todo]
    model.to(device)
    with _attention_mode(model):
        for batch in tqdm(batches, desc="keywords", unit="batch"):
            for j, mat in _safe_forward(model, enc, batch, num_words, layers, tokenizer.pad_token_id, device):
                yield todo[j], mat, "ok" if mat is not None else "failed"


def _scores(word_attn: torch.Tensor, tags: Sequence[str], cand_mask: Sequence[bool]) -> dict[int, float]:
    """Attention each candidate receives from the sentence's entities (summed), kept for inspection."""
    total = entity_attention(word_attn, tags).sum(dim=0)
    return {i: round(float(total[i]), 6) for i in _candidate_indices(cand_mask)}


def extract_keywords(model, tokenizer, sentences: Sequence[TaggedSentence], cfg: KeywordConfig,
                     language: str, device, seed: int) -> tuple[list[list[int]], list[dict], dict]:
    """Keyword word-indices for every sentence, an inspection record each, and counts.

    ``model`` is a Hugging Face encoder (the S1 tagger's, moved to ``device``)
    and ``tokenizer`` its fast tokenizer; both are used only when
    ``cfg.selection == "attention"``.  Sentences without entities, longer than
    ``cfg.max_subtokens`` sub-tokens (special tokens included) or whose
    forward pass fails get no keywords and are counted.  A run in which every
    attempted sentence fails raises, since that is a bug and not a bad sentence.
    """
    stop = stopwords(language) if cfg.stopwords == "stopwordsiso" else frozenset()
    masks = [candidates(s.tokens, s.tags, stop) for s in sentences]
    records = [{"keywords": [], "scores": {}, "status": "no_entity"} for _ in sentences]
    todo = [i for i, s in enumerate(sentences) if s.spans()]
    if cfg.selection == "attention":
        for i, mat, status in _word_attentions(model, tokenizer, sentences, todo, cfg, device):
            records[i]["status"] = status
            if mat is not None:
                tags = sentences[i].tags
                records[i]["keywords"] = select_by_attention(mat, tags, masks[i], cfg.p)
                records[i]["scores"] = _scores(mat, tags, masks[i])
    else:
        rng = random.Random(seed)
        for i in todo:
            records[i].update(status="ok", keywords=select(cfg.selection, sentences[i].tags, masks[i], cfg.p,
                                                           rng=rng))
    counts = Counter(r["status"] for r in records)
    if todo and counts["failed"] == len(todo):
        raise RuntimeError(f"keyword extraction failed on all {len(todo)} sentences; see the warnings above")
    summary = {"sentences": len(sentences), "with_keywords": sum(bool(r["keywords"]) for r in records)}
    summary.update({key: counts[key] for key in ("no_entity", "too_long", "failed")})
    return [r["keywords"] for r in records], records, summary
