"""DAGA (Ding et al., 2020; SPEC §3): sample new tagged sentences from a word-level LSTM LM.

A one-layer LSTM is trained on linearized sentences (:mod:`baselines.linearize`), keeping the epoch with
the lowest dev perplexity as DAGA does; samples from ``<bos>`` are parsed back and screened. Generated
from scratch, they have no source sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from aclm.base import tensorboard
from aclm.base.augmentation import kept_row
from aclm.base.config import DAGAConfig
from aclm.base.data import TaggedSentence
from baselines.linearize import linearize, screen, tag_vocabulary

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
Device = str | torch.device


@dataclass
class Vocabulary:
    """Words of the linearized training data, after the four special symbols."""

    itos: list[str]
    stoi: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.stoi = {word: i for i, word in enumerate(self.itos)}

    @classmethod
    def build(cls, sequences: Sequence[Sequence[str]]) -> "Vocabulary":
        words = dict.fromkeys(w for seq in sequences for w in seq if w not in (PAD, BOS, EOS, UNK))
        return cls([PAD, BOS, EOS, UNK, *words])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: Sequence[str]) -> list[int]:
        unk = self.stoi[UNK]
        return [self.stoi.get(w, unk) for w in words]


class LSTMLanguageModel(nn.Module):
    """Embedding -> one-layer LSTM -> dropout -> projection onto the vocabulary."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 dropout: float, pad_index: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_index)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, ids: torch.Tensor,
                state: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Next-word logits for every position of ``ids`` (batch, time), and the LSTM state to continue from."""
        hidden, state = self.lstm(self.embedding(ids), state)
        return self.output(self.dropout(hidden)), state


def _training_tensors(sentences: Sequence[TaggedSentence], vocab: Vocabulary,
                      max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded teacher-forcing pairs (``<bos> w1 .. wn`` -> ``w1 .. wn <eos>``) cut to ``max_length``; padding
    at the end cannot affect a left-to-right LSTM's real positions."""
    ids = [vocab.encode(linearize(s)) for s in sentences]
    width = min(max_length, max(len(x) for x in ids) + 1)
    pad, bos, eos = vocab.stoi[PAD], vocab.stoi[BOS], vocab.stoi[EOS]
    inputs = torch.full((len(ids), width), pad, dtype=torch.long)
    targets = torch.full((len(ids), width), pad, dtype=torch.long)
    for row, seq in enumerate(ids):
        src, tgt = ([bos] + seq)[:width], (seq + [eos])[:width]
        inputs[row, :len(src)] = torch.tensor(src)
        targets[row, :len(tgt)] = torch.tensor(tgt)
    return inputs, targets


@torch.no_grad()
def dev_perplexity(model: LSTMLanguageModel, inputs: torch.Tensor, targets: torch.Tensor, pad: int,
                   batch_size: int, device: torch.device) -> float:
    """exp of the mean next-word cross-entropy over the dev pairs' real positions."""
    model.eval()
    total, tokens = 0.0, 0
    for start in range(0, len(inputs), batch_size):
        x, y = inputs[start:start + batch_size].to(device), targets[start:start + batch_size].to(device)
        logits, _ = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=pad,
                                 reduction="sum").item()
        tokens += int((y != pad).sum())
    return torch.tensor(total / tokens).exp().item()     # inf, not an error, for a diverged model


def train_lm(sentences: Sequence[TaggedSentence], dev: Sequence[TaggedSentence], cfg: DAGAConfig, seed: int,
             device: Device = "cpu") -> tuple[LSTMLanguageModel, Vocabulary, dict]:
    """Fit the LM (Adam) and keep the lowest-dev-perplexity epoch, as DAGA does.  Seeds torch's global
    generator and shuffles with its own, so a seed fixes the model on CPU."""
    if not sentences or not dev:
        raise ValueError("DAGA needs training sentences and dev sentences (for choosing the epoch)")
    device = torch.device(device)
    torch.manual_seed(seed)
    vocab = Vocabulary.build([linearize(s) for s in sentences])
    pad = vocab.stoi[PAD]
    inputs, targets = _training_tensors(sentences, vocab, cfg.max_length)
    dev_inputs, dev_targets = _training_tensors(dev, vocab, cfg.max_length)
    model = LSTMLanguageModel(len(vocab), cfg.embedding_dim, cfg.hidden_size, cfg.dropout, pad).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    shuffle = torch.Generator().manual_seed(seed)
    best: dict = {}
    best_state: dict[str, torch.Tensor] = {}
    progress = tqdm(range(1, cfg.epochs + 1), desc="DAGA LM", unit="epoch")
    events = tensorboard.writer("daga_lm")
    for epoch in progress:
        model.train()
        total, tokens = 0.0, 0
        for batch in torch.randperm(len(inputs), generator=shuffle).split(cfg.batch_size):
            width = int((targets[batch] != pad).sum(1).max())
            x, y = inputs[batch, :width].to(device), targets[batch, :width].to(device)
            logits, _ = model(x)
            loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1), ignore_index=pad)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            real = int((y != pad).sum())
            total, tokens = total + loss.item() * real, tokens + real
        perplexity = dev_perplexity(model, dev_inputs, dev_targets, pad, cfg.batch_size, device)
        if epoch == 1 or perplexity < best["lm_best_dev_perplexity"]:    # the first epoch stands even at nan
            best = {"lm_best_epoch": epoch, "lm_best_dev_perplexity": perplexity}
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        progress.set_postfix(loss=f"{total / tokens:.3f}", dev_ppl=f"{perplexity:.1f}")
        if events:
            events.add_scalar("train/loss", total / tokens, epoch)
            events.add_scalar("dev/perplexity", perplexity, epoch)
    if events:
        events.close()
    model.load_state_dict(best_state)
    return model.eval(), vocab, best


@torch.no_grad()
def _sample_batch(model: LSTMLanguageModel, vocab: Vocabulary, n: int, max_length: int,
                  generator: torch.Generator, device: torch.device,
                  tags: Sequence[str] | None = None) -> list[tuple[list[str], bool]]:
    """Ancestral sampling of ``n`` sequences in lock-step, each with whether it reached ``<eos>``.  ``<pad>``,
    ``<bos>``, ``<unk>`` are never drawn; with ``tags`` (``daga.constrained``) no tag or ``<eos>`` follows a
    tag, and no ``<eos>`` comes before a first word."""
    pad, eos = vocab.stoi[PAD], vocab.stoi[EOS]
    banned = torch.tensor([pad, vocab.stoi[BOS], vocab.stoi[UNK]], device=device)
    is_tag = torch.zeros(len(vocab), dtype=torch.bool, device=device)
    is_tag[[vocab.stoi[t] for t in tags or () if t in vocab.stoi]] = True
    is_eos = torch.zeros(len(vocab), dtype=torch.bool, device=device)
    is_eos[eos] = True
    after_tag = torch.zeros(n, dtype=torch.bool, device=device)
    said = torch.full((n,), tags is None, dtype=torch.bool, device=device)   # a word drawn yet
    current = torch.full((n, 1), vocab.stoi[BOS], dtype=torch.long, device=device)
    drawn = torch.full((n, max_length), pad, dtype=torch.long, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    state = None
    for step in range(max_length):
        logits, state = model(current, state)
        logits = logits[:, -1].index_fill(1, banned, float("-inf"))
        logits = logits.masked_fill((after_tag.unsqueeze(1) & (is_tag | is_eos)) | (~said.unsqueeze(1) & is_eos),
                                    float("-inf"))
        nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
        after_tag = is_tag[nxt]
        said |= ~after_tag & ~is_eos[nxt]
        drawn[:, step] = nxt.masked_fill(finished, pad)
        finished |= nxt == eos
        if finished.all():
            break
        current = nxt.unsqueeze(1)
    rows = drawn.tolist()
    return [([vocab.itos[i] for i in row if i not in (pad, eos)], done)
            for row, done in zip(rows, finished.tolist())]


def _sample(model: LSTMLanguageModel, vocab: Vocabulary, n: int, max_length: int, seed: int,
            device: Device, batch_size: int, tags: Sequence[str] | None = None) -> list[tuple[list[str], bool]]:
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    model.eval()
    out: list[tuple[list[str], bool]] = []
    for start in range(0, n, batch_size):
        out += _sample_batch(model, vocab, min(batch_size, n - start), max_length, generator, device, tags)
    return out


def sample(model: LSTMLanguageModel, vocab: Vocabulary, n: int, max_length: int, seed: int,
           device: Device = "cpu", batch_size: int = 512) -> list[list[str]]:
    """``n`` linearized sequences of at most ``max_length`` words, drawn ``batch_size`` at a time."""
    return [words for words, _ in _sample(model, vocab, n, max_length, seed, device, batch_size)]


def generate(sentences: Sequence[TaggedSentence], dev: Sequence[TaggedSentence], cfg: DAGAConfig, rounds: int,
             seed: int, device: Device = "cpu") -> tuple[list[TaggedSentence], dict[str, int], dict]:
    """Train the LM and draw ``rounds`` x ``len(sentences)`` samples; keep the new, well-formed ones
    (:func:`baselines.linearize.screen`).  ``entities`` has no template here: the same as ``labels``."""
    model, vocab, lm = train_lm(sentences, dev, cfg, seed, device)
    tags = tag_vocabulary(sentences)
    samples = _sample(model, vocab, rounds * len(sentences), cfg.max_length, seed, device, batch_size=512,
                      tags=sorted(tags) if cfg.constrained != "off" else None)
    kept, counts = screen(samples, tags, sentences)
    for index, new in kept:
        new.meta = {"method": "daga", "sample_index": index}
    return [new for _, new in kept], counts, lm


def augment_gold(c, gold) -> tuple[list[dict], dict]:
    """The method table's entry point: R x gold samples, rows for generations.jsonl."""
    generated, counts, lm = generate(gold.train, gold.dev, c.daga, c.generation.rounds, c.seed, gold.device)
    return [kept_row(s, []) for s in generated], {**counts, **lm}
