"""Fine-tune the masked LM on linearized sentences, masking entity tokens only (SPEC §3).

Each entity sub-token is replaced by ``<mask>`` with probability eta, fresh every batch. The dev set is
masked once, so epochs' dev losses compare; the lowest is kept. Unlike the released MELM code (loss over
every token), the loss covers masked tokens only (``labels = -100`` elsewhere).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from transformers import (DataCollatorForLanguageModeling, DataCollatorForTokenClassification, Trainer,
                          TrainingArguments)

from aclm.base import tensorboard
from aclm.base.config import MELMConfig
from aclm.base.progress import show_progress
from aclm.steps.recipes import best_evaluation, precision_flags
from melm.encoding import Encoded

log = logging.getLogger("melm.training")


def training_features(encoded: Sequence[Encoded]) -> list[dict]:
    """Collator inputs, ``special_tokens_mask`` flagging all but entity tokens; entity-free sentences (no
    loss) are left out."""
    return [{"input_ids": e.input_ids, "attention_mask": [1] * len(e.input_ids),
             "special_tokens_mask": [int(k < 0) for k in e.entity]}
            for e in encoded if any(k >= 0 for k in e.entity)]


@dataclass
class EntityMaskingCollator(DataCollatorForLanguageModeling):
    """Masks each unflagged token with probability eta from its own seeded generator; a batch with no mask
    (a NaN loss) is redrawn, and items with ``labels`` (dev, masked once) are only padded."""

    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.generator = torch.Generator().manual_seed(self.seed)
        self.pad_masked = DataCollatorForTokenClassification(self.tokenizer)

    def torch_call(self, examples: list[dict]) -> dict:
        if "labels" in examples[0]:
            return self.pad_masked(examples)
        return super().torch_call(examples)

    def torch_mask_tokens(self, inputs: torch.Tensor, special_tokens_mask=None, offset_mapping=None):
        maskable = not bool(torch.as_tensor(special_tokens_mask).bool().all())
        while True:
            masked, labels = super().torch_mask_tokens(inputs.clone(), special_tokens_mask, offset_mapping)
            if not maskable or bool((labels != -100).any()):
                return masked, labels


def mask_once(features: Sequence[dict], collator: EntityMaskingCollator) -> list[dict]:
    """Each item masked once (with at least one mask), for a dev loss that every epoch shares."""
    out = []
    for feature in features:
        batch = collator([feature])
        out.append({key: batch[key][0].tolist() for key in ("input_ids", "attention_mask", "labels")})
    return out


def build_trainer(model, tokenizer, train: list[dict], dev: list[dict], cfg: MELMConfig, seed: int,
                  device: torch.device, out_dir: Path) -> Trainer:
    """A Trainer keeping the lowest-dev-loss epoch; constant-lr Adam, as MELM.  ``remove_unused_columns=False``
    lets ``special_tokens_mask`` reach the collator."""
    if not train or not dev:
        raise ValueError(f"MELM needs train and dev sentences with entities (got {len(train)} and {len(dev)})")
    args = TrainingArguments(
        output_dir=str(out_dir), num_train_epochs=cfg.epochs, learning_rate=cfg.lr, lr_scheduler_type="constant",
        per_device_train_batch_size=cfg.batch_size, per_device_eval_batch_size=cfg.batch_size,
        eval_strategy="epoch", save_strategy="epoch", save_total_limit=1, save_only_model=True,
        load_best_model_at_end=True, metric_for_best_model="eval_loss", greater_is_better=False,
        logging_strategy="epoch", seed=seed, data_seed=seed, report_to=[], remove_unused_columns=False,
        dataloader_num_workers=0, use_cpu=device.type == "cpu", **precision_flags("auto", device))
    dev_masked = mask_once(dev, EntityMaskingCollator(tokenizer, mlm_probability=cfg.mask_rate, seed=seed + 1))
    collator = EntityMaskingCollator(tokenizer, mlm_probability=cfg.mask_rate, seed=seed)
    return Trainer(model=model, args=args, train_dataset=train, eval_dataset=dev_masked, data_collator=collator,
                   callbacks=tensorboard.trainer_callbacks("melm"))


def finetune(model, tokenizer, train: list[dict], dev: list[dict], cfg: MELMConfig, seed: int,
             device: torch.device, out_dir: Path) -> dict:
    """Train, load the best epoch into ``model`` and delete the checkpoints (nothing reads them later)."""
    trainer = build_trainer(model, tokenizer, train, dev, cfg, seed, device, out_dir)
    show_progress(trainer, "fine-tune MELM").train()
    shutil.rmtree(out_dir, ignore_errors=True)
    best = best_evaluation(trainer)
    log.info("MELM fine-tuned: best dev loss %.4f at epoch %s", best["eval_loss"], best["epoch"])
    return {"train_sentences": len(train), "dev_sentences": len(dev),
            "best_dev_loss": best["eval_loss"], "best_epoch": best["epoch"]}
