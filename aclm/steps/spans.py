"""A span tagger (GLiNER, Zaratiana et al., NAACL 2024) scored as every tagger is (docs/reproducing.md).

Words are joined with single spaces; predicted character spans map back to BIO over the sentence's words,
so seqeval scores GLiNER on the same test sets as flair. In training each gold entity is the span of
GLiNER's own tokens (it splits ``U.S.`` into four): one tokenisation in training and use.
``encoder:<encoder>`` builds a GLiNER with no span pretraining over that encoder.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig
from transformers import TrainerCallback

from aclm.base.data import TaggedSentence
from aclm.base.models import load_path

log = logging.getLogger("aclm.steps.spans")
ENCODER = "encoder:"


def type_names(types: Sequence[str], labels: dict) -> dict[str, str]:
    """Each entity type -> the name GLiNER is prompted with."""
    return {t: str(labels.get(t, t.lower())) for t in types}


def load_gliner(name: str, max_width: int = 12):
    """A pretrained GLiNER, or (``encoder:<encoder>``) a new one over that encoder."""
    from gliner import GLiNER, GLiNERConfig

    if name.startswith(ENCODER):
        return GLiNER.from_config(GLiNERConfig(model_name=load_path(name[len(ENCODER):]), max_width=max_width))
    return GLiNER.from_pretrained(load_path(name), local_files_only=Path(load_path(name)).is_dir())


def word_offsets(words: Sequence[str]) -> list[tuple[int, int]]:
    """Each word's (start, end) characters in the words joined with single spaces."""
    offsets, at = [], 0
    for word in words:
        offsets.append((at, at + len(word)))
        at += len(word) + 1
    return offsets


def spans_to_bio(words: Sequence[str], entities: Sequence[dict], names: dict[str, str]) -> list[str]:
    """BIO tags over ``words`` from GLiNER's character spans; an entity overlapping a tagged word is dropped."""
    by_name = {name: t for t, name in names.items()}
    tags = ["O"] * len(words)
    for entity in sorted(entities, key=lambda e: (e["start"], -e["end"])):
        covered = [i for i, (s, e) in enumerate(word_offsets(words)) if s < entity["end"] and entity["start"] < e]
        if covered and all(tags[i] == "O" for i in covered) and entity["label"] in by_name:
            etype = by_name[entity["label"]]
            tags[covered[0]] = f"B-{etype}"
            for i in covered[1:]:
                tags[i] = f"I-{etype}"
    return tags


def predict_tags(model, sentences: Sequence[TaggedSentence], names: dict[str, str], cfg: DictConfig
                 ) -> list[list[str]]:
    """BIO tags for every sentence (GLiNER batched, ``gliner.threshold``)."""
    texts = [" ".join(s.tokens) for s in sentences]
    found = model.inference(texts, list(names.values()), flat_ner=True, threshold=cfg.threshold,
                            batch_size=cfg.batch_size)
    return [spans_to_bio(s.tokens, entities, names) for s, entities in zip(sentences, found)]


def training_example(model, sentence: TaggedSentence, names: dict[str, str]) -> dict:
    """A gold sentence as GLiNER trains on it: GLiNER's tokens of the joined text, entities as token spans."""
    text = " ".join(sentence.tokens)
    tokens = list(model.data_processor.words_splitter(text))
    offsets = word_offsets(sentence.tokens)
    ner = []
    for start, end, etype in sentence.spans():              # words [start, end)
        first, last = offsets[start][0], offsets[end - 1][1]
        inside = [i for i, (_, s, e) in enumerate(tokens) if first <= s and e <= last]
        if inside:
            ner.append([inside[0], inside[-1], names[etype]])
    return {"tokenized_text": [t for t, _, _ in tokens], "ner": ner}


class BestOnDev(TrainerCallback):
    """Score dev with the project's scorer every epoch; restore the best (first of equals) at the end."""

    def __init__(self, model, dev: Sequence[TaggedSentence], names: dict[str, str], cfg: DictConfig):
        self.model, self.dev, self.names, self.cfg = model, dev, names, cfg
        self.best, self.state, self.curve = -1.0, None, []

    def on_epoch_end(self, args, state, control, **kwargs):
        from aclm.base.metrics import evaluate_tags

        f1 = evaluate_tags([s.tags for s in self.dev], predict_tags(self.model, self.dev, self.names, self.cfg))["f1"]
        self.model.train()
        self.curve.append(f1)
        log.info("epoch %d: dev F1 %.4f", len(self.curve), f1)
        if f1 > self.best:
            self.best, self.state = f1, copy.deepcopy(self.model.state_dict())

    def on_train_end(self, args, state, control, **kwargs):
        if self.state is not None:
            self.model.load_state_dict(self.state)


def finetune(model, train: Sequence[TaggedSentence], dev: Sequence[TaggedSentence], names: dict[str, str],
             cfg: DictConfig, seed: int, out: Path) -> dict:
    """Fine-tune ``model`` on ``train`` with GLiNER's trainer, keeping the epoch with the best dev F1."""
    import transformers
    from gliner.training import Trainer, TrainingArguments

    examples = [training_example(model, s, names) for s in train]
    selection = BestOnDev(model, dev, names, cfg)
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"), learning_rate=cfg.lr, others_lr=cfg.others_lr or cfg.lr,
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size, save_strategy="no", report_to=[], seed=seed, data_seed=seed,
        logging_steps=max(1, len(examples) // cfg.batch_size), lr_scheduler_type="linear", warmup_ratio=0.1,
        dataloader_num_workers=0, use_cpu=not _cuda())
    tokenizer = ({"tokenizer": model.data_processor.transformer_tokenizer}
                 if int(transformers.__version__.split(".")[0]) < 5
                 else {"processing_class": model.data_processor.transformer_tokenizer})
    Trainer(model=model, args=args, train_dataset=examples, data_collator=model._create_data_collator(),
            callbacks=[selection], **tokenizer).train()
    return {"epochs_trained": len(selection.curve), "max_epochs": cfg.epochs, "dev_f1_by_epoch": selection.curve,
            "best_epoch": selection.curve.index(selection.best) + 1, "stop_reason": "all epochs, best on dev kept"}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
