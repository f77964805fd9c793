"""The NER tagger (S1 and S7) with flair.

Two recipes, one switch (``ner.tagger``):

* ``linear``: ACLM's tagger, a linear layer over the first sub-token of each
  word of a fine-tuned XLM-RoBERTa, no RNN and no CRF.
* ``bilstm_crf``: WikiNEuRal's, mean sub-token pooling over the average of the
  last four layers, a 2-layer BiLSTM and a CRF.

flair's trainer keeps the best model by dev F1 (``best-model.pt``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import flair
import torch
from flair.data import Corpus, Dictionary, Sentence
from flair.datasets import FlairDatapointDataset
from flair.embeddings import TransformerWordEmbeddings
from flair.models import SequenceTagger
from flair.trainers import ModelTrainer
from flair.trainers.plugins import AnnealingPlugin, LinearSchedulerPlugin
from omegaconf import DictConfig

from aclm.config import model_path
from aclm.data import TaggedSentence

LABEL_TYPE = "ner"
OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def to_flair(sentences: Sequence[TaggedSentence], with_labels: bool = True) -> list[Sentence]:
    """flair sentences with entity spans as ``ner`` labels (no re-tokenisation)."""
    out = []
    for s in sentences:
        fs = Sentence(list(s.tokens), use_tokenizer=False)
        if with_labels:
            for start, end, etype in s.spans():
                fs[start:end].add_label(LABEL_TYPE, etype)
        out.append(fs)
    return out


def spans_to_bio(sentence: Sentence) -> list[str]:
    tags = ["O"] * len(sentence)
    for span in sentence.get_spans(LABEL_TYPE):
        first = span.tokens[0].idx - 1
        tags[first] = f"B-{span.tag}"
        for token in span.tokens[1:]:
            tags[token.idx - 1] = f"I-{span.tag}"
    return tags


def label_dictionary(types: Sequence[str]) -> Dictionary:
    """Entity types as span labels; flair expands them to BIOES tags internally."""
    dictionary = Dictionary(add_unk=False)
    for t in sorted(types):
        dictionary.add_item(t)
    dictionary.span_labels = True
    return dictionary


def build_tagger(cfg: DictConfig, types: Sequence[str]) -> SequenceTagger:
    bilstm = cfg.tagger == "bilstm_crf"
    embeddings = TransformerWordEmbeddings(model_path(cfg.model), layers=cfg.layers, layer_mean=cfg.layer_mean,
                                           subtoken_pooling=cfg.subtoken_pooling, fine_tune=cfg.fine_tune)
    return SequenceTagger(embeddings=embeddings, tag_dictionary=label_dictionary(types), tag_type=LABEL_TYPE,
                          tag_format="BIOES", use_rnn=bilstm, use_crf=bilstm, rnn_layers=cfg.rnn_layers,
                          hidden_size=cfg.hidden_size, dropout=cfg.dropout if bilstm else 0.0,
                          reproject_embeddings=bilstm)


def train_tagger(cfg: DictConfig, train: Sequence[TaggedSentence], dev: Sequence[TaggedSentence],
                 types: Sequence[str], out_dir: Path) -> Path:
    """Train on ``train``, keep the best dev-F1 model; returns its path."""
    corpus = Corpus(train=FlairDatapointDataset(to_flair(train)), dev=FlairDatapointDataset(to_flair(dev)),
                    test=None, sample_missing_splits=False)
    tagger = build_tagger(cfg, types)
    scheduler = (AnnealingPlugin(base_path=out_dir, anneal_factor=0.5, patience=3, min_learning_rate=1e-4,
                                 initial_extra_patience=0, anneal_with_restarts=False)
                 if cfg.anneal_on_plateau else LinearSchedulerPlugin(warmup_fraction=cfg.warmup_fraction))
    ModelTrainer(tagger, corpus).train_custom(
        base_path=out_dir, learning_rate=cfg.lr, mini_batch_size=cfg.batch_size, eval_batch_size=cfg.eval_batch_size,
        max_epochs=cfg.epochs, optimizer=OPTIMIZERS[cfg.optimizer], plugins=[scheduler],
        embeddings_storage_mode="none", use_amp=flair.device.type == "cuda", save_final_model=False,
        create_file_logs=False, create_loss_file=True)
    best = out_dir / "best-model.pt"
    if not best.exists():  # no dev improvement was ever recorded (e.g. one epoch of all-O output)
        tagger.save(best)
    return best


def load_tagger(path: str | Path) -> SequenceTagger:
    return SequenceTagger.load(str(path))


def predict_tags(tagger: SequenceTagger, sentences: Sequence[TaggedSentence], batch_size: int = 64) -> list[list[str]]:
    flair_sentences = to_flair(sentences, with_labels=False)
    tagger.predict(flair_sentences, mini_batch_size=batch_size, label_name=LABEL_TYPE)
    return [spans_to_bio(s) for s in flair_sentences]
