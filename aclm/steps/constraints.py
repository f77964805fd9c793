"""Decoding that cannot break the label-token grammar (``generation.constrained``; docs/constrained-decoding.md).

An extension, not in the paper or the released code (default ``off``): the paper decodes freely and S5
drops what does not parse, which with a small generator is most generations. :class:`LabelGrammar`
masks, at each step, tokens that would make the text unparseable: ``labels`` keeps pairs well formed,
``entities`` also forces the template's entities, exactly and in order. A pair closes only after a
*word token* (neither special nor blank: ``<b-per> ▁ <b-per>`` is empty). With ``max_length`` only tokens
after which the grammar can still complete are allowed. ``paired=False`` serves MulDA's closing-less
linearization. Beam search hands over only sequences: each row's state advances from its parent (the
previous row equal to its prefix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TopKLogitsWarper

from aclm.steps.generator import target_end

MODES = ("off", "labels", "entities")
#: Positions before the first generated word: decoder start + language code (BERT2BERT: ``[CLS]`` twice).
MBART_PROMPT = 2
_NO_BUDGET = 1 << 30


@dataclass(frozen=True)
class TokenClasses:
    """What each id of a tokenizer is to the grammar; everything else (special, added, unknown) is never allowed."""

    word: torch.Tensor    # bool (ids,): pieces that are not special and decode to some text
    blank: torch.Tensor   # bool (ids,): pieces that are not special and decode to whitespace only
    label: torch.Tensor   # bool (ids,): the known label tokens
    eos: int              # the token that ends a target: ``</s>``, or BERT's ``[SEP]`` (which is no ``eos_token``)

    @classmethod
    def of(cls, tokenizer, labels: Sequence[str]) -> "TokenClasses":
        vocab = tokenizer.get_vocab()
        missing = [t for t in labels if t not in vocab]
        if missing:
            raise ValueError(f"label tokens {missing} are not tokens of the generator's vocabulary")
        size = max(len(tokenizer), max(vocab.values()) + 1)
        special = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
        plain = [(i, bool(piece.replace("▁", " ").strip())) for piece, i in vocab.items() if i not in special]
        return cls(_mask(size, [i for i, text in plain if text]), _mask(size, [i for i, text in plain if not text]),
                   _mask(size, [vocab[t] for t in labels]), target_end(tokenizer))


def _mask(size: int, ids: Sequence[int]) -> torch.Tensor:
    out = torch.zeros(size, dtype=torch.bool)
    out[list(ids)] = True
    return out


def template_entities(template: str, labels: Sequence[str]) -> list[str]:
    """The linearized entities of a template, in order (``<b-per> john <b-per> <i-per> smith <i-per>``).

    A pair starts a new entity unless it is an ``I-`` pair continuing the current one, as the parser reads.
    """
    known, words = set(labels), template.split()
    entities: list[list[str]] = []
    i, end = 0, -1
    while i < len(words):
        tag = words[i]
        if tag in known and i + 2 < len(words) and words[i + 2] == tag:
            same_type = entities and entities[-1][0][3:] == tag[3:]        # "<b-per>"[3:] == "<i-per>"[3:]
            continues = same_type and end == i and tag.startswith("<i-")
            if continues:
                entities[-1] += words[i:i + 3]
            else:
                entities.append(words[i:i + 3])
            i = end = i + 3
        else:
            i += 1
    return [" ".join(e) for e in entities]


@dataclass
class _Rows:
    """The grammar state of every row: open label id (-1: none), a word inside it, a word anywhere yet, next
    entity, tokens of it written."""

    open: torch.Tensor
    word: torch.Tensor
    said: torch.Tensor
    entity: torch.Tensor
    pos: torch.Tensor

    def take(self, index: torch.Tensor) -> "_Rows":
        return _Rows(self.open[index], self.word[index], self.said[index], self.entity[index], self.pos[index])


class LabelGrammar(LogitsProcessor):
    """Sets to -inf every token that would break the grammar (module docstring), row by row.

    ``entities``: per batch item, its template's entities as token ids (None: ``labels`` mode); rows are
    ``group_size`` beams per item; the first ``prompt_length`` positions are not constrained.
    """

    def __init__(self, classes: TokenClasses, *, paired: bool = True, entities: list[list[list[int]]] | None = None,
                 group_size: int = 1, prompt_length: int = MBART_PROMPT, max_length: int | None = None) -> None:
        if entities is not None and not paired:
            raise ValueError("entities are written as label pairs: paired=False has none")
        self.classes, self.paired, self.entities = classes, paired, entities
        self.group_size, self.prompt_length, self.max_length = group_size, prompt_length, max_length
        self._ready = False
        self._previous: tuple[torch.Tensor, _Rows] | None = None

    # --- tables, built once on the scores' device -------------------------------------------

    def _setup(self, scores: torch.Tensor) -> None:
        """Class masks padded to the logits' width (ids past the tokenizer never allowed), forbidden tokens
        per row kind, and ``entities`` mode's tables."""
        width, device = scores.shape[-1], scores.device
        c = self.classes
        self.group = torch.arange(scores.shape[0], device=device) // self.group_size   # each row's batch item

        def padded(mask: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(width, dtype=torch.bool)
            n = min(width, len(mask))
            out[:n] = mask[:n]
            return out.to(device)

        self.word, self.blank, self.label = padded(c.word), padded(c.blank), padded(c.label)
        eos = torch.zeros(width, dtype=torch.bool, device=device)
        eos[c.eos] = True
        # kind = 8·word + 4·blank + 2·labels + eos allowed
        kinds = [(self.word & bool(k & 8)) | (self.blank & bool(k & 4)) | (self.label & bool(k & 2)) | (eos & bool(k & 1))
                 for k in range(16)]
        self.forbidden = ~torch.stack(kinds)
        if self.entities is not None:
            self._entity_tables(device)
        self._ready = True

    def _entity_tables(self, device: torch.device) -> None:
        """Per batch item and entity (one padding entity past the last): its ids, length, first id, and the
        tokens still to write from it on."""
        items = len(self.entities)
        most = max((len(e) for e in self.entities), default=0) + 1
        longest = max((len(ids) for e in self.entities for ids in e), default=1)
        tokens = torch.full((items, most, longest), -1, dtype=torch.long)
        length = torch.zeros((items, most), dtype=torch.long)
        for b, entities in enumerate(self.entities):
            for e, ids in enumerate(entities):
                tokens[b, e, :len(ids)] = torch.tensor(ids, dtype=torch.long)
                length[b, e] = len(ids)
        self.tokens, self.length = tokens.to(device), length.to(device)
        self.rest = length.flip(1).cumsum(1).flip(1).to(device)
        self.first = self.tokens[:, :, 0]

    # --- state ----------------------------------------------------------------------------------

    def _initial(self, rows: int, device: torch.device) -> _Rows:
        zeros = torch.zeros(rows, dtype=torch.long, device=device)
        return _Rows(zeros - 1, zeros.bool(), zeros.bool(), zeros, zeros.clone())

    def _parents(self, prefix: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """Each row's parent: the previous call's row, within its batch item, equal to this row's prefix."""
        rows, k = prefix.shape[0], self.group_size
        if rows % k or previous.shape != prefix.shape:
            raise RuntimeError("LabelGrammar: the rows do not continue the previous step's rows "
                               "(a processor serves one generate call, with its group_size)")
        if prefix.shape[1] == 0:  # the first generated token: every row starts from the prompt
            return torch.arange(rows, device=prefix.device)
        same = (prefix.view(-1, k, 1, prefix.shape[1]) == previous.view(-1, 1, k, prefix.shape[1])).all(-1)
        if not bool(same.any(-1).all()):
            raise RuntimeError("LabelGrammar: a row continues none of its batch item's previous rows")
        first = same.int().argmax(-1)
        return (first + torch.arange(0, rows, k, device=prefix.device).unsqueeze(1)).flatten()

    def _advance(self, state: _Rows, token: torch.Tensor) -> _Rows:
        """The state after each row's new ``token``."""
        is_label, is_word = self.label[token], self.word[token]
        if self.paired:
            opening = is_label & (state.open < 0)
            closing = is_label & (token == state.open)
            open_ = torch.where(opening, token, torch.where(closing, -1, state.open))
            word = (state.word | is_word) & ~opening
        else:
            open_ = torch.where(is_label, token, torch.where(is_word, -1, state.open))
            word = state.word
        entity, pos = state.entity, state.pos
        if self.entities is not None:
            starts = (pos == 0) & (token == self.first[self.group, entity])
            pos = torch.where((pos > 0) | starts, pos + 1, pos)
            done = (pos > 0) & (pos == self.length[self.group, entity])
            entity, pos = entity + done.long(), pos.masked_fill(done, 0)
        return _Rows(open_, word, state.said | is_word, entity, pos)

    def _rows(self, input_ids: torch.Tensor) -> _Rows:
        """The state of every row, from its parent's (the first call after the prompt: the initial state)."""
        generated = input_ids[:, self.prompt_length:]
        rows = input_ids.shape[0]
        if generated.shape[1] == 0:
            state = self._initial(rows, input_ids.device)
        elif self._previous is None:
            raise RuntimeError("LabelGrammar: first called after the generation had started")
        else:
            previous_ids, previous = self._previous
            parents = self._parents(generated[:, :-1], previous_ids)
            state = self._advance(previous.take(parents), generated[:, -1])
        self._previous = (generated.clone(), state)
        return state

    # --- the mask -------------------------------------------------------------------------------

    def _options(self, state: _Rows, left: int) -> tuple[torch.Tensor, ...]:
        """Per row: may it write a word, a blank, a label token, the end; plus one extra allowed token (-1: none).
        ``left``: positions left, the last kept for the end; ``need``: tokens still owed before ending."""
        if self.entities is not None:
            return self._entity_options(state, left)
        closed, silent = state.open < 0, (~state.said).long()
        if self.paired:
            need = torch.where(closed, silent, torch.where(state.word, 1, 2))
            word_ok = torch.where(closed, 0, 1) <= left - 1
            labels_ok = closed & (2 <= left - 1)
            extra = torch.where(~closed & state.word, state.open, -1)
        else:
            need = torch.where(closed, silent, 1)
            word_ok = torch.full_like(closed, 0 <= left - 1)
            labels_ok = closed & (1 <= left - 1)
            extra = torch.full_like(state.open, -1)
        return word_ok, need <= left - 1, labels_ok, need == 0, extra

    def _entity_options(self, state: _Rows, left: int) -> tuple[torch.Tensor, ...]:
        """``entities``: free words while the remaining entities fit, the next entity forced through, the end
        after the last. If they cannot all fit, end at the first that does not fit whole (still well formed)."""
        group = self.group
        forcing = state.pos > 0
        need = self.rest[group, state.entity] - state.pos
        need = need + ((need == 0) & ~state.said).long()   # no entity: a word before the end all the same
        fits = need <= left
        word_ok = ~forcing & (need <= left - 1)
        begins = fits | (self.length[group, state.entity] <= left)
        forced = self.tokens[group, state.entity, state.pos.clamp(max=self.tokens.shape[2] - 1)]
        extra = torch.where(forcing, forced, torch.where(begins, self.first[group, state.entity], -1))
        eos_ok = (need == 0) | (~forcing & ~begins)
        return word_ok, word_ok, torch.zeros_like(forcing), eos_ok, extra

    def _forbidden(self, state: _Rows, length: int) -> torch.Tensor:
        """(rows, vocabulary) bool: what each row may not write at the position ``length``."""
        left = self.max_length - 1 - length if self.max_length else _NO_BUDGET
        word_ok, blank_ok, labels_ok, eos_ok, extra = self._options(state, left)
        kind = word_ok.long() * 8 + blank_ok.long() * 4 + labels_ok.long() * 2 + eos_ok.long()
        forbid = self.forbidden.index_select(0, kind)
        column = extra.clamp(min=0).unsqueeze(1)
        forbid.scatter_(1, column, forbid.gather(1, column) & (extra < 0).unsqueeze(1))
        return forbid

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        length = input_ids.shape[1]
        if length < self.prompt_length:
            return scores
        if not self._ready:
            self._setup(scores)
        out = scores.masked_fill(self._forbidden(self._rows(input_ids), length), float("-inf"))
        dead = out.amax(-1, keepdim=True) == float("-inf")
        return torch.where(dead, scores, out) if bool(dead.any()) else out


def sampling_arguments(grammar: LabelGrammar | None, top_k: int, num_beams: int) -> dict:
    """``generate`` kwargs for top-k sampling with ``grammar`` applied before the top-k cut.

    ``generate``'s own warper runs first and could keep only forbidden tokens, so with a grammar it is
    off (``top_k=0``) and the same warper follows the grammar (``min_tokens_to_keep`` as generate's).
    """
    if grammar is None:
        return {"top_k": top_k}
    warper = TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=2 if num_beams > 1 else 1)
    return {"top_k": 0, "logits_processor": LogitsProcessorList([grammar, warper])}
