"""MulDA (Liu et al., 2021; SPEC §3): sample tagged sentences from mBART-50 fine-tuned as a language model.

As DAGA, with mBART-50 as the ACLM paper ran it. Tag words join the vocabulary as whole tokens (a tag is
one decision, never a spelling); the encoder sees only the language code and the decoder learns the
linearized sentences; samples are screened as DAGA's. Where each ``mulda`` value comes from:
docs/configuration.md ("Paper, released code, default").
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase, Seq2SeqTrainer, set_seed

from aclm.base import tensorboard
from aclm.base.augmentation import Gold, kept_row
from aclm.base.models import load_path
from aclm.base.data import TaggedSentence
from aclm.base.progress import show_progress
from aclm.base.tokens import add_tokens
from aclm.steps.constraints import LabelGrammar, TokenClasses, sampling_arguments
from aclm.steps.generator import (language_code, load_generator, set_language, target_end, target_start,
                                  training_arguments)
from aclm.steps.generation import decode_keeping_labels
from aclm.steps.labels import label_words
from aclm.steps.recipes import best_evaluation
from baselines.linearize import Sample, linearize, screen, tag_vocabulary

log = logging.getLogger("baselines.mulda")



def setup(path: str, language: str, tags: Sequence[str], device: torch.device | None = None,
          init_words: Mapping[str, str] | None = None):
    """Load mBART-50 with ``tags`` as whole special tokens (plain added tokens would leave a stray ``▁``
    before every tag), starting from their type's words as ACLM's label tokens do."""
    model, tokenizer = load_generator(path, language, device)
    add_tokens(model, tokenizer, tags, {tag: label_words(tag, init_words or {}) for tag in tags})
    return model, tokenizer


def training_pair(sentence: TaggedSentence, tokenizer: PreTrainedTokenizerBase, max_length: int,
                  code: str | None = None) -> dict:
    """Encoder input: the target's first token alone, so the decoder is a language model of
    ``<code> linearized words </s>``."""
    set_language(tokenizer, code)
    target = tokenizer(text_target=" ".join(linearize(sentence)), max_length=max_length, truncation=True)
    return {"input_ids": [target_start(tokenizer)], "attention_mask": [1], "labels": target["input_ids"]}


def finetune(model, tokenizer: PreTrainedTokenizerBase, train: Sequence[TaggedSentence],
             dev: Sequence[TaggedSentence], cfg: DictConfig, seed: int, device: torch.device,
             checkpoints: Path, codes: tuple[Sequence[str], Sequence[str]] | None = None) -> tuple[object, dict]:
    """Fit the LM with ``Seq2SeqTrainer``; returns the best-by-dev-loss model (eval mode) and that evaluation.
    ``codes``: each train and dev sentence's language code (multilingual setting)."""
    train_codes, dev_codes = codes or ([None] * len(train), [None] * len(dev))
    pairs = [training_pair(s, tokenizer, cfg.max_length, c) for s, c in zip(train, train_codes)]
    dev_pairs = [training_pair(s, tokenizer, cfg.max_length, c) for s, c in zip(dev, dev_codes)]
    trainer = Seq2SeqTrainer(model=model, args=training_arguments(cfg, checkpoints, seed, device), train_dataset=pairs,
                             eval_dataset=dev_pairs, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
                             callbacks=tensorboard.trainer_callbacks("mulda_lm"))
    show_progress(trainer, "fine-tune MulDA's LM").train()
    return trainer.model.eval(), best_evaluation(trainer)


def split_output(ids: Sequence[int], eos: int) -> tuple[list[int], bool]:
    """The sampled ids after ``</s> <code>`` up to the first ``eos``, and whether there was one (if not,
    ``max_length`` cut it)."""
    body = list(ids[2:])
    return (body[:body.index(eos)], True) if eos in body else (body, False)


def decode(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int], tag_ids: set[int]) -> Sample:
    """A sample as words (tags as their own words) and whether it ended with ``</s>``."""
    body, finished = split_output(ids, target_end(tokenizer))
    return decode_keeping_labels(tokenizer, body, tag_ids).split(), finished


@torch.inference_mode()
def sample(model, tokenizer: PreTrainedTokenizerBase, n: int, cfg: DictConfig, tags: Sequence[str],
           seed: int, device: torch.device) -> list[Sample]:
    """``cfg.rounds`` x ``n`` samples.  The forced ``</s>`` at ``max_length`` is off, or a cut sample would
    look finished; ``constrained`` (``entities`` = ``labels``: no template) makes every tag precede a word."""
    code = target_start(tokenizer)
    tag_ids = set(tokenizer.convert_tokens_to_ids(list(tags)))
    classes = TokenClasses.of(tokenizer, tags) if cfg.constrained != "off" else None
    out: list[Sample] = []
    batch = cfg.generation_batch_size
    for call, start in enumerate(tqdm(range(0, n, batch), desc="MulDA sample", unit="batch")):
        inputs = torch.full((min(batch, n - start), 1), code, dtype=torch.long, device=device)
        grammar = LabelGrammar(classes, paired=False) if classes else None
        torch.manual_seed(seed + call)
        generated = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), do_sample=True,
                                   num_beams=1, num_return_sequences=cfg.rounds, max_length=cfg.max_length,
                                   forced_bos_token_id=code, forced_eos_token_id=None,
                                   **sampling_arguments(grammar, cfg.top_k, num_beams=1))
        out += [decode(tokenizer, ids, tag_ids) for ids in generated.tolist()]
    return out


def augment(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    """Fine-tune on the gold train split (best by dev loss), sample R x N, keep the new well-formed ones."""
    if not gold.train or not gold.dev:
        raise ValueError("MulDA needs training sentences and dev sentences (for choosing the checkpoint)")
    set_seed(cfg.seed)
    m = cfg.mulda
    tags = sorted(tag_vocabulary([*gold.train, *gold.dev]))
    device = torch.device(gold.device)
    model, tokenizer = setup(load_path(m.model), gold.languages[0], tags, device, dict(m.label_token_init))
    code = {lang: language_code(tokenizer, lang) for lang in {*gold.languages, *gold.dev_languages}}
    with tempfile.TemporaryDirectory(dir=gold.work_dir) as checkpoints:
        model, best = finetune(model, tokenizer, gold.train, gold.dev, m, cfg.seed, device,
                               Path(checkpoints), ([code[x] for x in gold.languages],
                                                   [code[x] for x in gold.dev_languages]))
    log.info("MulDA LM: best dev loss %.4f at epoch %s of %d", best["eval_loss"], best["epoch"], m.epochs)
    samples: list[Sample] = []
    for i, lang in enumerate(sorted(set(gold.languages))):  # R samples per gold sentence of each language
        set_language(tokenizer, code[lang])
        samples += sample(model, tokenizer, gold.languages.count(lang), m, tags, cfg.seed + 1000 * i, device)
    kept, counts = screen(samples, set(tags), gold.train)
    rows = [kept_row(s, [], sample_index=index) for index, s in kept]
    return rows, {**counts, "lm_best_dev_loss": best["eval_loss"], "lm_best_epoch": best["epoch"]}
