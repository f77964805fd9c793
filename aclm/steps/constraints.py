"""Decoding that cannot break the label-token grammar (``generation.constrained``).

The paper decodes freely and S5 drops every generation that does not parse;
with a small generator that is most of them (the generator merges
``<i-cw> w <i-cw> <i-cw> w <i-cw>`` into one pair, leaves a mask, stops with a
pair open).  :class:`LabelGrammar` is a transformers ``LogitsProcessor`` that
removes, at each step, the tokens that would make the text unreadable, so the
sampler only ever chooses among tokens that keep it well formed:

``off``
    nothing is removed: the paper's decoding and the default (an extension,
    not in the paper or the released code).
``labels``
    an opening label token is followed by at least one word, then by the same
    label token; no other label token while a pair is open; no end of
    sequence while a pair is open, nor before a first word (an empty
    generation does not parse either); never a label token of a type the
    data lacks, the mask token or any other special token (language codes,
    ``<unk>``, ``<s>``, ``<pad>``).
``entities``
    ``labels``, and the template's entities appear in the output exactly and
    in order.  The only label token that may open a pair is the first one of
    the template's next entity (any other would add an entity the template
    does not have); once it is written, the rest of that entity, its words
    and label tokens, every word of a multi-word entity, is forced.  The end
    of sequence comes only after the last entity.  Keywords and the words
    around the entities stay free.

A word is one or more sentencepiece pieces; at token level a pair may close
after at least one *word token*: a piece that is neither special nor blank
(``▁`` alone decodes to nothing, and ``<b-per> ▁ <b-per>`` is an empty pair).
Label tokens spelled out of ordinary pieces (``<``, ``b``, ``-per``, ``>``)
are not seen here; the parser still rejects them.

With ``max_length``, a step allows only the tokens after which the grammar can
still be completed in the positions left (a word and the closing label token,
the remaining entities), so a generation stopped at the length limit is well
formed too.  Entities longer than the whole budget are started at once and
cut.  A row where the grammar leaves nothing that the processors before it
allowed (a forced end of sequence in that case) is left as they made it.

MulDA's linearization (``B-PER john went``, :mod:`baselines.linearize`) has
no closing token: with ``paired=False`` a tag must be followed by a word,
which ends it.

Beam search reorders its beams at every step and gives a processor only the
sequences.  Each row's state (open label, word seen, next entity, position
inside a forced entity) lives in small tensors; every call finds each row's
parent among the previous call's rows of the same batch item (the row equal
to its prefix) and advances the parent's state by the one new token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TopKLogitsWarper

from aclm.steps.generator import target_end

MODES = ("off", "labels", "entities")
#: Positions before the first generated word in S5 and MulDA: the decoder start token and the language code
#: (BERT2BERT: ``[CLS]`` twice).
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
    """The linearized entities of a template, in order: ``<b-per> john <b-per> <i-per> smith <i-per>``.

    A pair starts a new entity unless it is an ``I-`` pair of the current
    entity's type right after it, as the parser reads a generation.
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

    ``entities`` (``entities`` mode): for each batch item, its template
    entities as token ids, in order; ``None`` for ``labels``.  Rows are
    ``group_size`` (the beams) per batch item.  The first ``prompt_length``
    positions are the decoder's prompt and are not constrained.
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
        """Class masks padded to the logits' width (rows past the tokenizer are never allowed) and, per row kind,
        the forbidden tokens; the entity tables of ``entities`` mode."""
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
        """Per row: may it write a word token, a blank one, any label token, the end of sequence; and the one
        more token it may write (-1: none).  ``left``: the positions from this one on, the last excluded (it is
        kept for the end of sequence); ``need``: the tokens a row must still write before it may end."""
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
        """``entities``: free words while the rest of the entities still fits after them, then the next entity's
        first label token, the entity forced through, the end of sequence after the last entity.

        When the entities cannot all fit, each is still begun only if it fits whole, and the generation ends
        at the first that does not: well formed, without the rest.
        """
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
    """``generate`` keyword arguments for top-k sampling, with ``grammar`` (if any) applied before the top-k cut.

    ``generate`` puts its own top-k warper before every processor passed to
    it; top-k first could keep only forbidden tokens and leave a row empty.
    So with a grammar the built-in warper is switched off (``top_k=0``) and
    the same warper follows the grammar, keeping as many tokens as generate
    would (one more than the end-of-sequence tokens under beam search).
    """
    if grammar is None:
        return {"top_k": top_k}
    warper = TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=2 if num_beams > 1 else 1)
    return {"top_k": 0, "logits_processor": LogitsProcessorList([grammar, warper])}
