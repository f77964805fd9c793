"""The NER tagger (S1 and S7) with flair (SPEC §2 S1).

``ner.tagger``: ``linear`` (ACLM's: a linear head over each word's first sub-token of a fine-tuned
XLM-R, no RNN, no CRF) or ``bilstm_crf`` (WikiNEuRal's). The best dev-F1 weights are kept in memory
and written once. A tagger with dev F1 0 or only ``O`` predictions raises :class:`NoLearning` (or warns,
with ``ner.on_no_learning=warn``) rather than feed attention maps, the consistency filter and scores
downstream.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence
from unittest.mock import patch

import flair
import torch
from flair.data import Corpus, Dictionary, Sentence
from flair.datasets import FlairDatapointDataset
from flair.embeddings import TransformerWordEmbeddings
from flair.file_utils import Tqdm
from flair.models import SequenceTagger
from flair.trainers import ModelTrainer
from flair.trainers.plugins import AnnealingPlugin, LinearSchedulerPlugin, TrainerPlugin, TrainingInterrupt
from omegaconf import DictConfig
from tqdm.auto import tqdm

from aclm.base import tensorboard
from aclm.base.models import load_path
from aclm.base.data import TaggedSentence
from aclm.base.runtime import RunError
from aclm.steps.subtokens import batched_subtokens

log = logging.getLogger("aclm.steps.ner")
LABEL_TYPE = "ner"


class FusedAdam(torch.optim.Adam):
    """Adam with torch's fused kernel: on 2 cores a MiniLM update took 22-36 ms, not 170-190 ms (a third
    of mini_fast's S1)."""

    def __init__(self, params, **kwargs) -> None:
        super().__init__(params, fused=True, **kwargs)


class FusedAdamW(torch.optim.AdamW):
    """AdamW with torch's fused kernel, as :class:`FusedAdam`."""

    def __init__(self, params, **kwargs) -> None:
        super().__init__(params, fused=True, **kwargs)


OPTIMIZERS = {"adam": FusedAdam, "adamw": FusedAdamW, "sgd": torch.optim.SGD}


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


def amp(cfg: DictConfig) -> bool:
    """Mixed precision (``ner.use_amp``): ``auto`` on CUDA only; the released code (flair 0.11.3) trained
    in full precision (``reference_code``: false)."""
    return flair.device.type == "cuda" if cfg.use_amp == "auto" else bool(cfg.use_amp)


def build_tagger(cfg: DictConfig, types: Sequence[str]) -> SequenceTagger:
    bilstm = cfg.tagger == "bilstm_crf"
    embeddings = TransformerWordEmbeddings(load_path(cfg.model), layers=cfg.layers, layer_mean=cfg.layer_mean,
                                           subtoken_pooling=cfg.subtoken_pooling, fine_tune=cfg.fine_tune)
    return SequenceTagger(embeddings=embeddings, tag_dictionary=label_dictionary(types), tag_type=LABEL_TYPE,
                          tag_format="BIOES", use_rnn=bilstm, use_crf=bilstm, rnn_layers=cfg.rnn_layers,
                          hidden_size=cfg.hidden_size, dropout=cfg.dropout if bilstm else 0.0,
                          reproject_embeddings=cfg.reproject_embeddings)


class EarlyStopping(TrainerPlugin):
    """Stop after ``patience`` evaluations without a new best dev score (WikiNEuRal's protocol)."""

    def __init__(self, patience: int) -> None:
        super().__init__()
        self.patience, self.bad_epochs, self.stopped = patience, 0, False

    @TrainerPlugin.hook
    def after_evaluation(self, current_model_is_best, **kw):
        self.bad_epochs = 0 if current_model_is_best else self.bad_epochs + 1
        if self.bad_epochs >= self.patience:
            self.stopped = True
            raise TrainingInterrupt(f"{self.patience} epochs without dev gain: early stop")


class TrainingInterrupted(KeyboardInterrupt):
    """Training ended early with no stopping rule met: a Ctrl-C flair swallowed (it returns as if done).
    Raised again so the stage unwinds unstamped."""


class EpochCounter(TrainerPlugin):
    """Counts the epochs whose dev evaluation finished (attached first, so a stop rule cannot skip it)."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs = 0

    @TrainerPlugin.hook
    def after_evaluation(self, epoch, **kw):
        self.epochs = epoch


class EpochTimes(TrainerPlugin):
    """Seconds per epoch training, scoring dev, and the rest (saving), for the stage's log and stamp."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[dict] = []
        self._mark = 0.0

    def _lap(self) -> float:
        now = time.perf_counter()
        lap, self._mark = now - self._mark, now
        return round(lap, 3)

    @TrainerPlugin.hook
    def before_training_epoch(self, epoch, **kw):
        self.close()
        self._mark = time.perf_counter()
        self.epochs.append({"epoch": epoch})

    @TrainerPlugin.hook
    def after_training_epoch(self, epoch, **kw):
        self.epochs[-1]["train"] = self._lap()

    @TrainerPlugin.hook
    def after_evaluation(self, epoch, **kw):
        self.epochs[-1]["dev"] = self._lap()

    @TrainerPlugin.hook
    def after_training_loop(self, **kw):
        self.close()

    def close(self) -> None:
        """End the last epoch: what followed its dev score (saving) until now."""
        if self.epochs and "dev" in self.epochs[-1] and "save" not in self.epochs[-1]:
            last = self.epochs[-1]
            last["save"] = self._lap()
            log.info("epoch %d: %.2f s training, %.2f s scoring dev, %.2f s saving", last["epoch"], last["train"],
                     last["dev"], last["save"])

    def totals(self) -> dict:
        return {part: round(sum(e.get(part, 0.0) for e in self.epochs), 3) for part in ("train", "dev", "save")}


class BestInMemory(TrainerPlugin):
    """The best dev epoch's weights in CPU memory, instead of flair rewriting ``best-model.pt`` (2.2 GB for
    XLM-R-large) at every improvement; same weights, only the writes are saved."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict | None = None

    @TrainerPlugin.hook
    def after_evaluation(self, current_model_is_best, **kw):
        if current_model_is_best:
            self.state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def restore(self, tagger: SequenceTagger) -> None:
        """Put the best epoch's weights back (none recorded: the last epoch's stay, as flair leaves them)."""
        if self.state is not None:
            tagger.load_state_dict(self.state)


@contextmanager
def no_dev_predictions_file(tagger: SequenceTagger) -> Iterator[None]:
    """Suppress flair's per-epoch ``dev.tsv`` predictions file, which nothing reads."""
    evaluate = tagger.evaluate
    tagger.evaluate = lambda *args, **kwargs: evaluate(*args, **{**kwargs, "out_path": None})
    try:
        yield
    finally:
        del tagger.evaluate


class EpochProgress(TrainerPlugin):
    """One bar over the epochs with dev F1 and lr, instead of flair's log (silenced by :func:`quiet_flair`)."""

    def __init__(self, epochs: int) -> None:
        super().__init__()
        self.bar = tqdm(total=epochs, desc="train tagger", unit="epoch", dynamic_ncols=True)
        self.best = 0.0

    @TrainerPlugin.hook
    def after_evaluation(self, validation_scores, **kw):
        if validation_scores:
            self.best = max(self.best, 100 * validation_scores[0])
            lr = self.trainer.optimizer.param_groups[0]["lr"]
            self.bar.set_postfix_str(f"dev F1 {100 * validation_scores[0]:.2f} (best {self.best:.2f}), lr {lr:.2g}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _silent_tqdm(*args, **kwargs):
    return tqdm(*args, **{**kwargs, "disable": True})


@contextmanager
def quiet_flair() -> Iterator[None]:
    """flair logs warnings only and draws no bars of its own inside the block."""
    logger = logging.getLogger("flair")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with patch.object(Tqdm, "tqdm", staticmethod(_silent_tqdm)):
            yield
    finally:
        logger.setLevel(level)


def stop_reason(cfg: DictConfig, epochs: int, plugins: Sequence[TrainerPlugin]) -> str:
    """Why training ended: ``all epochs``, ``patience`` or ``annealing floor``; raises if none holds."""
    if epochs >= cfg.epochs:
        return "all epochs"
    if any(isinstance(p, EarlyStopping) and p.stopped for p in plugins):
        return "patience"
    annealing = [p for p in plugins if isinstance(p, AnnealingPlugin)]
    if annealing and min(getattr(annealing[0], "current_learning_rate", [cfg.lr])) < cfg.min_lr:
        return "annealing floor"
    raise TrainingInterrupted(f"training stopped after {epochs} of {cfg.epochs} epochs, no stopping rule met")


def schedule_plugins(cfg: DictConfig, out_dir: Path) -> list[TrainerPlugin]:
    """The learning-rate schedule (``ner.schedule``) and, if set, early stopping."""
    plugins: list[TrainerPlugin] = []
    if cfg.schedule == "anneal":  # flair's default: halve the lr after ``anneal_patience`` flat epochs
        plugins.append(AnnealingPlugin(base_path=out_dir, anneal_factor=0.5, patience=cfg.anneal_patience,
                                       min_learning_rate=cfg.min_lr, initial_extra_patience=0,
                                       anneal_with_restarts=False))
    elif cfg.schedule == "linear":
        plugins.append(LinearSchedulerPlugin(warmup_fraction=cfg.warmup_fraction))
    if cfg.early_stopping:
        plugins.append(EarlyStopping(cfg.early_stopping))
    return plugins


def tensorboard_plugins() -> list[TrainerPlugin]:
    """flair's own TensorBoard logger (loss, dev score, learning rate per epoch) where the stage logs."""
    path = tensorboard.folder("tagger")
    if path is None:
        return []
    from flair.trainers.plugins.loggers.tensorboard import TensorboardLogger

    return [TensorboardLogger(log_dir=str(path))]


def train_tagger(cfg: DictConfig, train: Sequence[TaggedSentence], dev: Sequence[TaggedSentence],
                 types: Sequence[str], out_dir: Path) -> tuple[Path, dict]:
    """Train on ``train``, keep the best dev-F1 model; returns its path and facts (epochs, why it stopped)."""
    corpus = Corpus(train=FlairDatapointDataset(to_flair(train)), dev=FlairDatapointDataset(to_flair(dev)),
                    test=None, sample_missing_splits=False)
    counter, progress, times, best_weights = EpochCounter(), EpochProgress(cfg.epochs), EpochTimes(), BestInMemory()
    plugins = [counter, times, progress, best_weights, *schedule_plugins(cfg, out_dir), *tensorboard_plugins()]
    try:
        with quiet_flair(), batched_subtokens():
            tagger = build_tagger(cfg, types)
            with no_dev_predictions_file(tagger):   # use_final_model_for_eval: no best-model.pt written per epoch
                ModelTrainer(tagger, corpus).train_custom(
                    base_path=out_dir, learning_rate=cfg.lr, mini_batch_size=cfg.batch_size,
                    eval_batch_size=cfg.eval_batch_size, max_epochs=cfg.epochs, optimizer=OPTIMIZERS[cfg.optimizer],
                    plugins=plugins, embeddings_storage_mode="none", use_amp=amp(cfg), use_final_model_for_eval=True,
                    save_final_model=False, create_file_logs=False, create_loss_file=True)
    finally:
        progress.close()
    times.close()
    facts = {"epochs_trained": counter.epochs, "max_epochs": cfg.epochs,
             "stop_reason": stop_reason(cfg, counter.epochs, plugins), "seconds": times.totals(),
             "epoch_seconds": times.epochs}
    best = out_dir / "best-model.pt"
    best_weights.restore(tagger)
    start = time.perf_counter()
    tagger.save(best)
    facts["seconds"]["final_save"] = round(time.perf_counter() - start, 3)
    log.info("tagger trained %d of %d epochs (%s)", counter.epochs, cfg.epochs, facts["stop_reason"])
    return best, facts


def load_tagger(path: str | Path) -> SequenceTagger:
    with quiet_flair():   # not its tag dictionary, logged at every load
        return SequenceTagger.load(str(path))


def predict_tags(tagger: SequenceTagger, sentences: Sequence[TaggedSentence], batch_size: int = 64,
                 progress: bool = False) -> list[list[str]]:
    """BIO tags for every sentence, batched (``progress``: a bar with the ETA, for test sets)."""
    flair_sentences = to_flair(sentences, with_labels=False)
    with batched_subtokens():
        tagger.predict(flair_sentences, mini_batch_size=batch_size, label_name=LABEL_TYPE, verbose=progress)
    return [spans_to_bio(s) for s in flair_sentences]


class NoLearning(RunError):
    """The trained tagger learned nothing: dev F1 0, or only ``O`` predicted."""


def check_learned(dev_f1: float, predicted: Sequence[Sequence[str]], cfg: DictConfig, where: Path) -> None:
    """Fail (or warn, ``ner.on_no_learning=warn``) when the best dev model learned nothing."""
    all_o = all(tag == "O" for tags in predicted for tag in tags)
    if dev_f1 > 0 and not all_o:
        return
    what = "predicts only O on the dev set" if all_o else "has dev F1 0"
    message = (f"{where}: the tagger learned nothing: it {what} (optimizer {cfg.optimizer}, lr {cfg.lr}, "
               f"batch {cfg.batch_size}, {cfg.epochs} epochs, model {cfg.model}). Its attention maps, "
               f"consistency filter and scores would be meaningless. Check the recipe (ner.*): the paper's "
               f"literal Adam lr 1e-2 is known to end all-O; see docs/configuration.md.")
    if cfg.on_no_learning == "warn":
        log.warning(message)
        return
    raise NoLearning(message)
