"""S4: fine-tune mBART-50 to turn templates back into whole labeled sentences (SPEC §2 S4).

Input: a template (S3, dynamic mask redrawn every epoch); target: the linearized sentence. Label tokens
start from words naming their type, as MELM's; the lowest-dev-loss epoch is kept (:class:`KeepBestWeights`).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Mapping, Sequence

import torch
from omegaconf import DictConfig
from torch.utils.data import Dataset
from transformers import (AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq, PreTrainedTokenizerBase,
                          Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback)

from aclm.base import tensorboard
from aclm.base.io import atomic_write_text
from aclm.base.progress import show_progress
from aclm.base.tokens import add_tokens
from aclm.steps.label_init import add_released
from aclm.steps.labels import label_tokens, label_words
from aclm.steps.recipes import best_evaluation, precision_flags
from aclm.steps.templates import Piece, dynamic_mask, render

log = logging.getLogger("aclm.steps.generator")


def language_code(tokenizer: PreTrainedTokenizerBase, language: str) -> str | None:
    """The mBART-50 code of a language (``en`` -> ``en_XX``); None for a tokenizer without codes (BERT2BERT)."""
    table = getattr(tokenizer, "lang_code_to_id", None)
    if not table:
        return None
    codes = [c for c in table if c.split("_")[0] == language]
    if not codes:
        raise ValueError(f"the generator's tokenizer has no language code for {language!r}")
    return codes[0]


def set_language(tokenizer: PreTrainedTokenizerBase, code: str | None) -> None:
    """Make ``code`` start the sources and targets the tokenizer writes (nothing to do without codes)."""
    if code is not None and (tokenizer.src_lang != code or tokenizer.tgt_lang != code):
        tokenizer.src_lang = tokenizer.tgt_lang = code


def target_start(tokenizer: PreTrainedTokenizerBase) -> int:
    """The token every target starts with, forced first in decoding: mBART-50's ``tgt_lang`` code, BERT's ``[CLS]``."""
    return tokenizer(text_target="")["input_ids"][0]


def target_end(tokenizer: PreTrainedTokenizerBase) -> int:
    """The token every target ends with: ``</s>`` (mBART-50) or ``[SEP]`` (BERT)."""
    return tokenizer(text_target="")["input_ids"][-1]


def add_label_tokens(model, tokenizer: PreTrainedTokenizerBase, types: Sequence[str],
                     init_words: Mapping[str, str]) -> list[str]:
    """Add ``<b-x>``/``<i-x>`` per type, embeddings from :func:`label_words`.  Without its position word a
    type's two tokens start identical: on en-100 the mini generator's S5 then kept 8-12%, not 33%."""
    tokens = label_tokens(types)
    add_tokens(model, tokenizer, tokens, {t: label_words(t[1:-1], init_words) for t in tokens})
    return tokens


def load_generator(path: str, language: str, device: torch.device | None = None):
    tokenizer = AutoTokenizer.from_pretrained(path)
    set_language(tokenizer, language_code(tokenizer, language))
    model = AutoModelForSeq2SeqLM.from_pretrained(path)
    if device is not None:
        model.to(device)
    return model, tokenizer


class TemplateDataset(Dataset):
    """(template, linearized sentence) pairs, re-masked every epoch from a generator seeded per (epoch, item),
    so a seed gives the same data in any order."""

    def __init__(self, skeletons: list[list[Piece]], targets: list[str], codes: list[str | None], tokenizer,
                 mask_token: str, max_length: int, seed: int, dynamic: bool = True) -> None:
        self.skeletons, self.targets, self.codes, self.tokenizer = skeletons, targets, codes, tokenizer
        self.mask_token, self.max_length, self.seed, self.dynamic = mask_token, max_length, seed, dynamic
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.skeletons)

    def template(self, i: int) -> str:
        pieces = self.skeletons[i]
        if self.dynamic:
            pieces = dynamic_mask(pieces, random.Random(f"{self.seed}:{self.epoch}:{i}"))
        return render(pieces, self.mask_token)

    def __getitem__(self, i: int) -> dict:
        set_language(self.tokenizer, self.codes[i])   # several languages in the multilingual setting
        return self.tokenizer(self.template(i), text_target=self.targets[i], max_length=self.max_length,
                              truncation=True)


class RedrawMasks(TrainerCallback):
    """Tell the dataset which epoch is starting so it draws fresh masks."""

    def __init__(self, dataset: TemplateDataset) -> None:
        self.dataset = dataset

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.dataset.epoch = int(state.epoch or 0)


class KeepBestWeights(TrainerCallback):
    """Copy the weights at the lowest dev loss (first of ties, as ``load_best_model_at_end``) to the CPU and
    restore them at the end: the trainer's checkpoints took ~8 s of a 12 s mBART-50 epoch on an H200."""

    def __init__(self) -> None:
        self.best_loss: float | None = None
        self.weights: dict[str, torch.Tensor] = {}

    @staticmethod
    def tensors(model) -> dict[str, torch.Tensor]:
        return {**dict(model.named_parameters()), **dict(model.named_buffers())}

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        loss = metrics["eval_loss"]
        if self.best_loss is None or loss < self.best_loss:
            self.best_loss = loss
            self.weights = {name: t.detach().to("cpu", copy=True) for name, t in self.tensors(model).items()}

    def on_train_end(self, args, state, control, model=None, **kwargs):
        with torch.no_grad():
            for name, t in self.tensors(model).items():
                t.copy_(self.weights[name])


def training_arguments(cfg: DictConfig, work_dir: Path, seed: int, device: torch.device) -> Seq2SeqTrainingArguments:
    """The generator's recipe (also MulDA's): evaluate every epoch, no checkpoints (:class:`KeepBestWeights`)."""
    return Seq2SeqTrainingArguments(
        output_dir=str(work_dir), num_train_epochs=cfg.epochs, learning_rate=cfg.lr,
        per_device_train_batch_size=cfg.batch_size, per_device_eval_batch_size=cfg.batch_size,
        weight_decay=cfg.weight_decay, eval_strategy="epoch", save_strategy="no",
        seed=seed, data_seed=seed, report_to=[], logging_steps=10, dataloader_num_workers=0,
        use_cpu=device.type == "cpu", **precision_flags(cfg.mixed_precision, device))


def epoch_losses(log_history: Sequence[dict]) -> list[dict]:
    """Per epoch: mean logged training loss (None: fewer steps than the logging interval) and dev loss."""
    rows: list[dict] = []
    for evaluation in (entry for entry in log_history if "eval_loss" in entry):
        start = rows[-1]["epoch"] if rows else 0.0
        losses = [e["loss"] for e in log_history if "loss" in e and start < e["epoch"] <= evaluation["epoch"]]
        rows.append({"epoch": evaluation["epoch"], "train_loss": sum(losses) / len(losses) if losses else None,
                     "dev_loss": evaluation["eval_loss"]})
    return rows


def write_loss_table(rows: Sequence[dict], path: Path) -> None:
    """The epochs' losses as a tab-separated table, as flair's ``loss.tsv`` keeps S1's."""
    def cell(loss: float | None) -> str:
        return "-" if loss is None else f"{loss:.4f}"

    lines = [f"{row['epoch']:g}\t{cell(row['train_loss'])}\t{cell(row['dev_loss'])}\n" for row in rows]
    atomic_write_text(path, "EPOCH\tTRAIN_LOSS\tDEV_LOSS\n" + "".join(lines))


def cut_targets(tokenizer: PreTrainedTokenizerBase, targets: Sequence[str], max_length: int,
                labels: Sequence[str]) -> dict[str, int]:
    """How many ``targets`` ``generator.max_length`` cuts, and how many inside a label pair (the generator
    then learns a malformed target)."""
    label_ids = set(tokenizer.convert_tokens_to_ids(list(labels)))
    whole = tokenizer(text_target=list(targets))["input_ids"] if targets else []
    cut = [ids[:max_length - 1] for ids in whole if len(ids) > max_length]
    return {"cut": len(cut), "cut_inside_label_pair": sum(sum(i in label_ids for i in kept) % 2 for kept in cut)}


def finetune(cfg: DictConfig, train: tuple[list[list[Piece]], list[str]], dev: tuple[list[list[Piece]], list[str]],
             languages: dict[str, list[str]], types: Sequence[str], out_dir: Path, work_dir: Path, seed: int,
             device: torch.device) -> dict:
    """Fine-tune ``cfg.model`` on templates; save the best-by-dev-loss model to ``out_dir``.  Each sentence's
    language code starts its source and target."""
    model, tokenizer = load_generator(cfg.model, languages["train"][0])
    if cfg.label_init == "released":
        add_released(model, tokenizer, types, seed)
    else:
        add_label_tokens(model, tokenizer, types, dict(cfg.label_token_init))
    mask = tokenizer.mask_token
    codes = {split: [language_code(tokenizer, lang) for lang in langs] for split, langs in languages.items()}
    train_set = TemplateDataset(*train, codes["train"], tokenizer, mask, cfg.max_length, seed)
    dev_set = TemplateDataset(*dev, codes["dev"], tokenizer, mask, cfg.max_length, seed)
    targets = {"train": train[1], "dev": dev[1]}
    cut = {split: cut_targets(tokenizer, texts, cfg.max_length, label_tokens(types)) for split, texts in targets.items()}
    if any(c["cut"] for c in cut.values()):
        log.warning("generator.max_length=%d cuts %s; %s of them inside a label pair, so S4 learns those "
                    "targets malformed", cfg.max_length,
                    ", ".join(f"{c['cut']} of {len(targets[s])} {s} targets" for s, c in cut.items()),
                    sum(c["cut_inside_label_pair"] for c in cut.values()))
    trainer = Seq2SeqTrainer(model=model, args=training_arguments(cfg, work_dir, seed, device), train_dataset=train_set,
                             eval_dataset=dev_set, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
                             callbacks=[RedrawMasks(train_set), KeepBestWeights(),
                                        *tensorboard.trainer_callbacks("generator")])
    show_progress(trainer, "fine-tune generator").train()
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    write_loss_table(epoch_losses(trainer.state.log_history), out_dir / "loss.tsv")
    best = best_evaluation(trainer)
    log.info("generator fine-tuned: best dev loss %.4f at epoch %s of %d", best["eval_loss"], best["epoch"], cfg.epochs)
    return {"best_dev_loss": best["eval_loss"], "best_epoch": best["epoch"], "epochs": cfg.epochs,
            "train_pairs": len(train_set), "dev_pairs": len(dev_set), "cut_targets": cut}
