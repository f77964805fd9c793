"""S2: choose, for every training sentence, the context words its entities attend to (SPEC §2 S2).

The S1 encoder's attention over the chosen layers is summed over heads and layers, then collapsed from
sub-tokens to words and words to entities (a node *receives* the sum, *gives* the mean). Each entity keeps
its top ``k = ceil(p * non-entity words)`` candidates; keywords are the union. ``keywords.selection``:
``random`` (matched control: as many as attention chose), ``random_released`` (the released draw:
``ceil(p * non-entity non-punctuation words)``, stop words allowed, entity-free sentences too), ``none``
(ACLM only entity). Differences from the released S2: docs/reference-code.md.
"""

from __future__ import annotations

import logging
import math
import random
import re
import unicodedata
from collections import Counter
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import stopwordsiso
import torch
from tqdm.auto import tqdm


from aclm.base.config import KeywordConfig

from aclm.base.layers import NEEDS_ATTENTION, layer_indices
from aclm.base.data import TaggedSentence, bio_spans

log = logging.getLogger(__name__)

SELECTIONS = ("attention", "random", "random_released", "none")
#: The ten MultiCoNER languages, whose stop-word lists the released code joined into one.
MULTICONER_LANGUAGES = ("en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr", "zh")
_ASCII_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
WordIds = Sequence[Optional[int]]


class AttentionUnavailable(RuntimeError):
    """The model returned no attention maps: every sentence would fail the same way."""


# --------------------------------------------------------------------------- candidates
#
# ``keywords.rule``: ``paper`` excludes all-punctuation/symbol words and every entity word. ``released``
# excludes words with any ASCII punctuation (``u.s.``, ``co-founded``; ``।`` stays); every other entity's
# first word (with its summed column) competes for top-k slots, then is dropped; at p = 0 every candidate
# is a keyword (``argpartition(row, -0)``).


def stopwords(language: str, source: str = "stopwordsiso") -> frozenset[str]:
    """Lower-cased stop words: the language's ``stopwordsiso`` list, ``stopwordsiso_all`` (the ten MultiCoNER
    lists joined, as released) or ``none``.  An unknown language warns and gets none, so a new dataset runs."""
    if source == "none":
        return frozenset()
    if source == "stopwordsiso_all":
        return frozenset(w.lower() for lang in MULTICONER_LANGUAGES for w in stopwordsiso.stopwords(lang))
    if not stopwordsiso.has_lang(language):
        log.warning("no stop-word list for language %r: stop words stay keyword candidates", language)
        return frozenset()
    return frozenset(w.lower() for w in stopwordsiso.stopwords(language))


def is_punctuation(word: str, rule: str = "paper") -> bool:
    """paper: every character is punctuation or a symbol (Unicode P* or S*); released: any ASCII punctuation."""
    if rule == "released":
        return bool(_ASCII_PUNCTUATION.search(word))
    return all(unicodedata.category(ch)[0] in "PS" for ch in word)


def candidates(tokens: Sequence[str], tags: Sequence[str], stop: frozenset[str], rule: str = "paper") -> list[bool]:
    """Which words may become keywords: outside entities, not punctuation, not stop words (in any case; the
    released rule matches as written, so ``The`` stays a candidate)."""
    return [tag == "O" and not is_punctuation(word, rule) and (word if rule == "released" else word.lower()) not in stop
            for word, tag in zip(tokens, tags)]


def keyword_count(p: float, words: int, available: int) -> int:
    """``k = ceil(p * words)``, at most ``available``; rounded first so float noise cannot add a keyword
    (0.28 * 25 is 7.000000000000001)."""
    return min(math.ceil(round(p * words, 9)), available)


# --------------------------------------------------------------------------- attention maps


def _as_group_ids(ids: WordIds | torch.Tensor) -> torch.Tensor:
    """Group ids as a tensor, with -1 for ungrouped positions (special tokens, padding)."""
    if isinstance(ids, torch.Tensor):
        return ids
    return torch.tensor([-1 if i is None else i for i in ids], dtype=torch.long)


def collapse(attn: torch.Tensor, groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Merge ``[..., T, T]`` into ``[..., G, G]`` (group -1: dropped): a group gives the mean of its rows
    (a distribution, as one token's) and receives the sum of its columns (independent of how finely it is split)."""
    assign = (groups.unsqueeze(-1) == torch.arange(num_groups, device=groups.device)).to(attn.dtype)
    sizes = assign.sum(dim=-2, keepdim=True).clamp(min=1)
    return (assign / sizes).transpose(-1, -2) @ attn @ assign


def word_attention(attn: torch.Tensor, word_ids: WordIds | torch.Tensor, num_words: int) -> torch.Tensor:
    """Word-level attention from a sub-token map; special tokens (``word_ids`` None or -1) are dropped."""
    return collapse(attn, _as_group_ids(word_ids).to(attn.device), num_words)


def entity_attention(word_attn: torch.Tensor, tags: Sequence[str]) -> torch.Tensor:
    """Attention each entity gives to each word, ``[entities, words]``: entities collapsed to nodes
    (:func:`collapse`), self-attention zeroed so an entity never scores its own words."""
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
                        p: float, rule: str = "paper") -> list[int]:
    """ACLM: union of each entity's top-k candidates by the attention it gives them, sorted.  Ties go to the
    earlier word (the released ``argpartition`` order is arbitrary); ``released`` rule: the note above."""
    spans = bio_spans(tags)
    if not spans:
        return []
    pool = _candidate_indices(cand_mask)
    if rule == "released":
        if p == 0:
            return pool
        pool = sorted(pool + [start for start, _, _ in spans])
    k = keyword_count(p, sum(tag == "O" for tag in tags), len(pool))
    if k == 0:
        return []
    scores = entity_attention(word_attn, tags).cpu()
    chosen: set[int] = set()
    for e, (start, _, _) in enumerate(spans):
        own_pool = torch.tensor([i for i in pool if i != start], dtype=torch.long)
        top = torch.sort(scores[e, own_pool], descending=True, stable=True).indices[:k]
        chosen.update(own_pool[top].tolist())
    return sorted(i for i in chosen if cand_mask[i])


def select_random(tags: Sequence[str], cand_mask: Sequence[bool], count: int, rng: random.Random) -> list[int]:
    """ACLM random, a matched control: one uniform draw of ``count`` candidates per sentence."""
    return sorted(rng.sample(_candidate_indices(cand_mask), min(count, sum(cand_mask))))


def select_random_released(tokens: Sequence[str], tags: Sequence[str], p: float, rule: str,
                           rng: random.Random) -> list[int]:
    """The released ACLM random: ``ceil(p * non-entity non-punctuation words)`` of those words, one draw,
    stop words allowed, whether or not the sentence has entities."""
    pool = [i for i, (word, tag) in enumerate(zip(tokens, tags)) if tag == "O" and not is_punctuation(word, rule)]
    return sorted(rng.sample(pool, keyword_count(p, len(pool), len(pool))))


# --------------------------------------------------------------------------- batched extraction


def subtoken_limit(cfg_limit: int, tokenizer) -> int:
    """The configured limit, lowered to what the tokenizer says the model accepts."""
    model_limit = getattr(tokenizer, "model_max_length", None)
    if model_limit is None or model_limit > 1_000_000:  # transformers' "no limit" sentinel
        return cfg_limit
    return min(cfg_limit, model_limit)


@contextmanager
def _attention_mode(model) -> Iterator[None]:
    """Eval mode with eager attention (the only kind returning maps), restored after; older models (XLM-R in
    4.57) switch to eager themselves under ``output_attentions=True``."""
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
    """Keyword indices for every sentence, an inspection record each, and counts.

    Sentences without entities, too long (``cfg.max_subtokens``) or whose forward pass fails get none and
    are counted (SPEC §2 S2); if every attempted sentence fails it is a bug, and raises.
    """
    stop = stopwords(language, cfg.stopwords)
    masks = [candidates(s.tokens, s.tags, stop, cfg.rule) for s in sentences]
    records = [{"keywords": [], "scores": {}, "status": "no_entity"} for _ in sentences]
    todo = [i for i, s in enumerate(sentences) if s.spans()]
    if cfg.selection in NEEDS_ATTENTION:
        for i, mat, status in _word_attentions(model, tokenizer, sentences, todo, cfg, device):
            records[i]["status"] = status
            if mat is not None:
                tags = sentences[i].tags
                records[i]["keywords"] = select_by_attention(mat, tags, masks[i], cfg.p, cfg.rule)
                records[i]["scores"] = _scores(mat, tags, masks[i])
        if cfg.selection == "random":  # as many as attention chose, drawn uniformly
            for i in todo:
                rng = random.Random(f"{seed}:random:{i}")
                records[i]["keywords"] = select_random(sentences[i].tags, masks[i], len(records[i]["keywords"]), rng)
    elif cfg.selection == "random_released":
        for i, s in enumerate(sentences):
            records[i].update(status="ok" if i in todo else "no_entity",
                              keywords=select_random_released(s.tokens, s.tags, cfg.p, cfg.rule,
                                                              random.Random(f"{seed}:random:{i}")))
    elif cfg.selection == "none":
        for i in todo:
            records[i]["status"] = "ok"
    else:
        raise ValueError(f"keywords.selection={cfg.selection!r} is not one of {SELECTIONS}")
    counts = Counter(r["status"] for r in records)
    if todo and counts["failed"] == len(todo):
        raise RuntimeError(f"keyword extraction failed on all {len(todo)} sentences; see the warnings above")
    summary = {"sentences": len(sentences), "with_keywords": sum(bool(r["keywords"]) for r in records),
               "keywords": sum(len(r["keywords"]) for r in records)}
    summary.update({key: counts[key] for key in ("no_entity", "too_long", "failed")})
    return [r["keywords"] for r in records], records, summary


def keywords_of_split(model, tokenizer, sentences: Sequence[TaggedSentence], languages: Sequence[str],
                      cfg: KeywordConfig, device, seed: int) -> tuple[list[dict], Counter]:
    """S2 over a split, each language's sentences with its own stop words (multilingual setting)."""
    records: list[dict] = [{} for _ in sentences]
    counts: Counter = Counter()
    for language in sorted(set(languages)):
        index = [i for i, sentence_language in enumerate(languages) if sentence_language == language]
        _, found, found_counts = extract_keywords(model, tokenizer, [sentences[i] for i in index], cfg, language,
                                                  device, seed)
        for i, record in zip(index, found):
            records[i] = record
        counts.update(found_counts)
    return records, counts
