"""A small mBART-50 pretrained here, with mBART's own denoising objective (text infilling), on public text.

No pretrained seq2seq model installs without a model hub, and the random tiny mBART-50 of
:mod:`tools.tiny_models` writes noise. Model, text, objective, budget and measured figures:
docs/mini-profile.md. Decisions that matter here:

* weights start at fairseq's scale (std d_model^-0.5) and both position tables from one sinusoidal
  table: with Hugging Face's init defaults the model had not learned to copy the unmasked words after
  the same budget;
* sentences are single sentences, so mBART's sentence permutation has nothing to permute;
* data order and every sentence's masks come from the seed, so a killed build resumes from its last
  checkpoint to the weights of one never stopped; the thread count changes a sum's last bits, so it
  is part of the fingerprint (threads wait asleep, aclm/__init__.py: under 2x beside one busy program).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import sentencepiece as spm
import tokenizers
import torch
import transformers
from filelock import FileLock
from torch.utils.data import Dataset, Sampler
from tqdm.contrib.logging import logging_redirect_tqdm
from transformers import (MBart50TokenizerFast, MBartConfig, MBartForConditionalGeneration, Seq2SeqTrainer,
                          Seq2SeqTrainingArguments, TrainerCallback)
from transformers.trainer import TRAINER_STATE_NAME

from aclm.base.io import atomic_dir, read_json, write_json
from aclm.base.paths import PROJECT_ROOT
from aclm.base.progress import show_progress
from aclm.base.runtime import Interrupted
from aclm.steps.generator import set_language
from tools.tiny_models import _n_params, _special_ids, train_mbart50_tokenizer

log = logging.getLogger("tools.pretraining")

DEFAULT_OUT_DIR = PROJECT_ROOT / "models" / "mini"
MODEL_NAME = "mbart-large-50"
#: Per kind of generator (a spec's ``kind``; none: ``mbart``): the model folder's name and the default output.
MODEL_NAMES = {"mbart": MODEL_NAME, "bert2bert": "bert2bert-minilm"}
DEFAULT_OUT_DIRS = {"mbart": DEFAULT_OUT_DIR, "bert2bert": PROJECT_ROOT / "models" / "mini-warm"}
MANIFEST_NAME = "manifest.json"
WORK_NAME = ".work"                    # checkpoints of an unfinished build (resumed from)

#: Everything that decides the weights, besides the seed and the text.
SPEC: dict = {
    # English alone reached held-out token accuracy 0.626, English within en+de+es+nl 0.548 (same budget)
    "languages": ["en"],
    "lowercase": True,
    "max_words": 64,               # longer sentences (0.3% of the text) are left out
    "heldout_share": 0.01,         # per language
    "vocab_size": 8000,
    "model_max_length": 256,
    "max_length": 96,              # tokens per source and target in training
    # HF's init (std 0.02, random positions) had not learned to copy after 1000 steps; init_std = 256^-0.5
    "position_init": "sinusoidal",
    "finetune_dropout": 0.1,       # the saved config's dropout, for fine-tuning (pretraining runs without)
    "config": {
        "d_model": 256,
        "encoder_layers": 3,
        "decoder_layers": 3,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 1024,
        "decoder_ffn_dim": 1024,
        "max_position_embeddings": 256,
        "scale_embedding": True,
        "init_std": 0.0625,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
    },
    "noise": {"mask_ratio": 0.35, "poisson_lambda": 3.5},
    # 1500 steps of 32 at 1.5e-3 (14.6 min) copy far better than 2000 of 16 at 1e-3 (9 min): held-out
    # accuracy 0.671 vs 0.626, and 14 of 30 acceptance generations usable vs 2 of 24 (tests/test_mini_generator.py)
    "train": {
        "steps": 1500,
        "batch_size": 32,
        "lr": 1.5e-3,
        "warmup_steps": 100,
        "schedule": "linear",
        "weight_decay": 0.01,
        "adam_beta2": 0.98,
    },
}

#: Seconds between checkpoints: a clock, since a step takes 0.5-0.6 s on 2 idle cores and ten times that on
#: busy ones. Saving draws no random number, so this is no part of :data:`SPEC`.
CHECKPOINT_SECONDS = 60


# --------------------------------------------------------------------------- text


def mbart_code(language: str) -> str:
    """``en`` -> ``en_XX``: the mBART-50 code of an ISO 639-1 language."""
    from tools.tiny_models import MBART50_LANGUAGE_CODES

    codes = [c for c in MBART50_LANGUAGE_CODES if c.split("_")[0] == language]
    if not codes:
        raise ValueError(f"mBART-50 has no language code for {language!r}")
    return codes[0]


def text_files(data_dir: str | Path, languages: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """The pretraining text (WikiNEuRal silver), and the MultiCoNER files whose sentences are left out of it."""
    from aclm.base.datasets import get_spec

    data_dir = Path(data_dir)
    text = [get_spec(f"wikineural/{lang}").path(get_spec(f"wikineural/{lang}").train, data_dir) for lang in languages]
    benchmark = []
    for lang in languages:
        spec = get_spec(f"multiconer/{lang}")
        benchmark += [spec.path(rel, data_dir) for rel in (spec.train, spec.dev, spec.test)
                      if rel and spec.path(rel, data_dir).exists()]
    missing = [str(p) for p in text if not p.exists()]
    if missing:
        raise FileNotFoundError(f"pretraining text not found: {', '.join(missing)} (set ACLM_DATA_DIR or --data-dir "
                                f"to the folder that holds wikineural/<lang>/silver.conllu)")
    return text, benchmark


def load_corpus(data_dir: str | Path, spec: dict = SPEC) -> tuple[dict[str, list[list[str]]], dict]:
    """Words of every WikiNEuRal sentence per language (lower-cased), deduplicated, without benchmark sentences."""
    from aclm.base.datasets import load_split

    def norm(words: Sequence[str]) -> list[str]:
        return [w.lower() for w in words] if spec["lowercase"] else list(words)

    corpus, facts = {}, {}
    for lang in spec["languages"]:
        benchmark = set()
        for split in ("train", "dev", "test"):
            try:
                benchmark |= {" ".join(norm(s.tokens)) for s in load_split(f"multiconer/{lang}", split, data_dir) or []}
            except FileNotFoundError:
                pass
        seen: set[str] = set()
        kept, counts = [], {"read": 0, "too_long": 0, "duplicate": 0, "in_benchmark": 0}
        for sentence in load_split(f"wikineural/{lang}", "train", data_dir):  # words only: tags are not read
            counts["read"] += 1
            words = norm(sentence.tokens)
            key = " ".join(words)
            if not words or len(words) > spec["max_words"]:
                counts["too_long"] += 1
            elif key in seen:
                counts["duplicate"] += 1
            elif key in benchmark:
                counts["in_benchmark"] += 1
            else:
                seen.add(key)
                kept.append(words)
        counts["kept"] = len(kept)
        corpus[lang], facts[lang] = kept, counts
    return corpus, facts


def split_heldout(corpus: dict[str, list[list[str]]], share: float, seed: int
                  ) -> tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]:
    """(language, words) pairs for training and for the held-out evaluation: ``share`` of each language."""
    train, heldout = [], []
    for lang, sentences in corpus.items():
        order = list(range(len(sentences)))
        random.Random(f"{seed}:heldout:{lang}").shuffle(order)
        n = max(1, round(share * len(sentences)))
        heldout += [(lang, sentences[i]) for i in sorted(order[:n])]
        train += [(lang, sentences[i]) for i in sorted(order[n:])]
    return train, heldout


# --------------------------------------------------------------------------- the objective


def mask_spans(words: Sequence[str], rng: np.random.Generator, mask_token: str = "<mask>",
               ratio: float = 0.35, poisson_lambda: float = 3.5) -> list[str]:
    """mBART's text infilling: ``round(ratio * n)`` words in Poisson spans, each span one ``mask_token``.

    Spans sit at distinct gaps between kept words, so two never merge into one mask (surplus spans join
    the last); a span of length 0 inserts a mask.
    """
    n = len(words)
    target = int(round(ratio * n))
    if n == 0 or target == 0:
        return list(words)
    lengths: list[int] = []
    while sum(lengths) < target:
        lengths.append(int(rng.poisson(poisson_lambda)))
    lengths[-1] -= sum(lengths) - target
    kept = n - target
    gaps = kept + 1                                  # before the first kept word, between them, after the last
    if len(lengths) > gaps:
        lengths = lengths[:gaps - 1] + [sum(lengths[gaps - 1:])]
    order = rng.permutation(len(lengths))            # spans in random order ...
    slots = np.sort(rng.choice(gaps, size=len(lengths), replace=False))   # ... at random distinct gaps
    out: list[str] = []
    pos = 0                                          # next word of the sentence
    kept_seen = 0                                    # kept words emitted so far
    slot_lengths = dict(zip(slots.tolist(), (lengths[i] for i in order)))
    for gap in range(gaps):
        if gap in slot_lengths:
            out.append(mask_token)
            pos += slot_lengths[gap]
        if gap < kept:
            out.append(words[pos])
            pos += 1
            kept_seen += 1
    assert pos == n and kept_seen == kept
    return out


class SentenceDataset(Dataset):
    """(language code, words) pairs; an item carries its index so its masks depend on nothing else."""

    def __init__(self, sentences: Sequence[tuple[str, list[str]]]) -> None:
        self.sentences = list(sentences)

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, i: int) -> dict:
        code, words = self.sentences[i]
        return {"index": i, "code": code, "words": words}


@dataclass
class DenoisingCollator:
    """Mask (:func:`mask_spans`), encode with the language code where the tokenizer has one, pad labels with -100.
    Sentence ``i``'s masks in epoch ``e`` are seeded by ``(seed, e, i)``: the same whatever the batch or a resume."""

    tokenizer: transformers.PreTrainedTokenizerBase
    max_length: int = 96
    mask_ratio: float = 0.35
    poisson_lambda: float = 3.5
    seed: int = 0
    epoch: int = 0

    def noisy(self, feature: dict) -> str:
        rng = np.random.default_rng([self.seed, self.epoch, feature["index"]])
        return " ".join(mask_spans(feature["words"], rng, self.tokenizer.mask_token, self.mask_ratio,
                                   self.poisson_lambda))

    def __call__(self, features: list[dict]) -> dict:
        encoded = []
        for f in features:
            set_language(self.tokenizer, f["code"])
            encoded.append(self.tokenizer(self.noisy(f), text_target=" ".join(f["words"]),
                                          max_length=self.max_length, truncation=True))
        batch = self.tokenizer.pad([{k: e[k] for k in ("input_ids", "attention_mask")} for e in encoded],
                                   return_tensors="pt")
        width = max(len(e["labels"]) for e in encoded)
        batch["labels"] = torch.tensor([e["labels"] + [-100] * (width - len(e["labels"])) for e in encoded])
        return batch


class LengthGroupedSampler(Sampler):
    """Seeded batches of similar length, in random order: padding would otherwise waste half the compute.
    Sorted within windows of ``window`` batches; seeded by ``(seed, epoch)`` so a resume sees the same order."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, window: int = 50) -> None:
        self.lengths, self.batch_size, self.seed, self.window = list(lengths), batch_size, seed, window
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.lengths)).tolist()
        size = self.window * self.batch_size
        batches: list[list[int]] = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start:start + size], key=lambda i: self.lengths[i])
            batches += [chunk[k:k + self.batch_size] for k in range(0, len(chunk), self.batch_size)]
        last = [batches.pop()] if batches and len(batches[-1]) < self.batch_size else []
        return iter([i for b in [*(batches[k] for k in rng.permutation(len(batches))), *last] for i in b])


class PretrainingTrainer(Seq2SeqTrainer):
    """``Seq2SeqTrainer`` drawing its training batches from :class:`LengthGroupedSampler`."""

    def _get_train_sampler(self, train_dataset=None):
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        return LengthGroupedSampler([len(words) for _, words in dataset.sentences], self.args.train_batch_size,
                                    self.args.data_seed)

    def _issue_warnings_after_load(self, load_result) -> None:
        """Tied weights are expected missing from a checkpoint (safetensors stores a shared tensor once, and Hugging
        Face warns all the same); any other missing or unexpected key would resume a different model: fatal."""
        missing = sorted(set(load_result.missing_keys) - restored_with_a_twin(self.model, load_result.missing_keys))
        if missing or load_result.unexpected_keys:
            raise RuntimeError(f"the checkpoint does not fit the model (missing {missing}, unexpected "
                               f"{load_result.unexpected_keys}): delete the build's {WORK_NAME} folder to start over")
        if load_result.missing_keys:
            log.info("checkpoint weights restored; %s share a tensor stored once and were restored with it",
                     ", ".join(sorted(load_result.missing_keys)))


def restored_with_a_twin(model: torch.nn.Module, missing: Sequence[str]) -> set[str]:
    """The ``missing`` parameter names whose tensor another name, one the checkpoint has, shares (tied weights)."""
    groups: dict[int, set[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), set()).add(name)
    return {name for group in groups.values() if len(group) > 1 and not group <= set(missing)
            for name in group & set(missing)}


def last_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint in ``folder``; ones cut short while saving are removed. Complete means
    ``trainer_state.json``, written last: HF's ``get_last_checkpoint`` would pick a cut one and fail every retry."""
    found = sorted((p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1])) if folder.is_dir() else []
    complete = [p for p in found if (p / TRAINER_STATE_NAME).is_file()]
    for cut in (p for p in found if p not in complete):
        log.info("removing %s: saving it was interrupted", cut.name)
        shutil.rmtree(cut)
    return complete[-1] if complete else None


class SetEpoch(TrainerCallback):
    """Tell the collator which epoch starts (a run longer than one pass draws fresh masks)."""

    def __init__(self, collator: DenoisingCollator) -> None:
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.epoch = int(state.epoch or 0)


class CheckpointClock(TrainerCallback):
    """Ask for a checkpoint every ``seconds``, but not at the last step: the finished model is saved right after."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.last = seconds, 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.last >= self.seconds and state.global_step < state.max_steps:
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        self.last = time.monotonic()


class StepSummary(TrainerCallback):
    """A log line per training log (step, loss, time left): in a log file the progress bar is one long line.
    Time per step counts from this process's first step, so a resumed build estimates its own."""

    def __init__(self) -> None:
        self.start, self.first_step = 0.0, 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start, self.first_step = time.perf_counter(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in (logs or {}):                 # not the evaluations' logs, nor the final summary's
            log.info(step_summary(state.global_step, state.max_steps, logs["loss"], logs["learning_rate"],
                                  time.perf_counter() - self.start, state.global_step - self.first_step))


def step_summary(step: int, total: int, loss: float, lr: float, seconds: float, steps_run: int) -> str:
    """``step 300/1500 (20%): loss 3.1360, lr 1.07e-03, 0.52 s/step, 10m24s left``."""
    per_step = seconds / max(steps_run, 1)
    left = round(per_step * (total - step))
    return (f"step {step}/{total} ({100 * step // total}%): loss {loss:.4f}, lr {lr:.2e}, {per_step:.2f} s/step, "
            f"{left // 60}m{left % 60:02d}s left")


def argmax_logits(logits, labels):
    """Keep only the predicted ids of the evaluation (the full logits would fill memory)."""
    return (logits[0] if isinstance(logits, tuple) else logits).argmax(dim=-1)


def token_accuracy(prediction) -> dict:
    """Teacher-forced accuracy over the target tokens (language code, words and ``</s>``; padding excluded)."""
    predicted, labels = prediction.predictions, prediction.label_ids
    width = min(predicted.shape[1], labels.shape[1])
    predicted, labels = predicted[:, :width], labels[:, :width]
    real = labels != -100
    return {"token_accuracy": float((predicted[real] == labels[real]).mean())}


# --------------------------------------------------------------------------- the build


def sinusoids(positions: int, dim: int) -> torch.Tensor:
    """The Transformer's sinusoidal position table (sines in the first half of the features, cosines in the second)."""
    rates = torch.exp(-np.log(10000.0) * torch.arange(0, dim // 2, dtype=torch.float64) / (dim // 2))
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * rates[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).float()


def build_model(tokenizer: MBart50TokenizerFast, spec: dict, seed: int) -> MBartForConditionalGeneration:
    """A fresh small mBART; decoding starts from ``</s>``, as in facebook/mbart-large-50.

    ``position_init: sinusoidal`` starts both learned position tables from one sinusoidal table: source and
    target positions start aligned, which lets a small budget learn to copy the unmasked words.
    """
    config = MBartConfig(**_special_ids(tokenizer), decoder_start_token_id=tokenizer.eos_token_id,
                         forced_eos_token_id=tokenizer.eos_token_id, **spec["config"])
    torch.manual_seed(seed)
    model = MBartForConditionalGeneration(config)
    if spec.get("position_init", "random") == "sinusoidal":
        with torch.no_grad():
            for table in (model.model.encoder.embed_positions, model.model.decoder.embed_positions):
                offset = table.offset                      # mBART's learned positions start at row 2
                table.weight[offset:] = sinusoids(table.weight.shape[0] - offset, config.d_model)
    return model


def training_arguments(spec: dict, checkpoints: Path, seed: int) -> Seq2SeqTrainingArguments:
    """The Trainer's settings; checkpoints come from :class:`CheckpointClock`, the last one only is kept."""
    t = spec["train"]
    return Seq2SeqTrainingArguments(
        output_dir=str(checkpoints), max_steps=t["steps"], per_device_train_batch_size=t["batch_size"],
        per_device_eval_batch_size=t["batch_size"], learning_rate=t["lr"], warmup_steps=t["warmup_steps"],
        lr_scheduler_type=t["schedule"], weight_decay=t["weight_decay"], adam_beta2=t["adam_beta2"],
        save_strategy="no", save_total_limit=1, eval_strategy="no",
        logging_steps=max(1, min(50, t["steps"] // 10)), seed=seed, data_seed=seed, report_to=[],
        dataloader_num_workers=0, remove_unused_columns=False, disable_tqdm=True)


def _display(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def fingerprint(corpus: dict, base: Sequence[Path], spec: dict, seed: int) -> str:
    """Hash of all that decides the weights: spec, seed, text as read, base files, code, versions, and the
    thread count (it changes how sums are split, so the weights' last bits)."""
    payload = {
        "spec": spec, "seed": seed,
        "text": hashlib.sha256(json.dumps(corpus, sort_keys=True).encode()).hexdigest(),
        "base": [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in base],
        "code": build_code(kind_of(spec)),
        "versions": versions(),
        "threads": torch.get_num_threads(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def build_code(kind: str) -> dict[str, str]:
    """Digests, by syntax tree without docstrings, of the code that decides the weights; the text is hashed as
    read, so the data readers need no listing here."""
    from aclm.run.provenance import source_digests

    modules = {"mbart": ["tools.tiny_models"], "bert2bert": ["tools.warm_start"]}[kind]
    return source_digests("tools.pretraining", *modules, set_language)


def versions() -> dict:
    return {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "sentencepiece": spm.__version__, "torch": torch.__version__}


def read_manifest(out_dir: str | Path) -> dict | None:
    path = Path(out_dir) / MANIFEST_NAME
    return read_json(path) if path.is_file() else None


def kind_of(spec: dict) -> str:
    return spec.get("kind", "mbart")


def is_up_to_date(out_dir: Path, key: str, model_name: str = MODEL_NAME) -> bool:
    manifest = read_manifest(out_dir)
    return (manifest is not None and manifest.get("fingerprint") == key
            and (out_dir / model_name / "config.json").is_file())


def base_spec(kind: str) -> dict:
    """The spec of a kind of generator: :data:`SPEC` (``mbart``) or :data:`tools.warm_start.SPEC` (``bert2bert``)."""
    from tools import warm_start

    specs = {"mbart": SPEC, "bert2bert": warm_start.SPEC}
    if kind not in specs:
        raise ValueError(f"unknown kind of generator {kind!r}: one of {', '.join(specs)}")
    return specs[kind]


def merged_spec(overrides: dict | None, kind: str = "mbart") -> dict:
    """``overrides`` merged into the ``kind``'s spec, nested dicts key by key."""
    spec = copy.deepcopy(base_spec(kind))
    for key, value in (overrides or {}).items():
        if isinstance(value, dict):
            spec[key].update(value)
        else:
            spec[key] = value
    return spec


def run_training(trainer: PretrainingTrainer, resume: Path | None, checkpoints: Path):
    """``trainer.train``, our log lines kept clear of the bar; on an interruption, say where a rerun resumes."""
    with logging_redirect_tqdm():
        try:
            return trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        except (KeyboardInterrupt, SystemExit, Interrupted):
            saved = last_checkpoint(checkpoints)
            log.warning("stopped at step %d of %d; a rerun resumes from %s", trainer.state.global_step,
                        trainer.state.max_steps, saved.name if saved else "the start (no checkpoint yet)")
            raise


def trained_loss(result, resumed_from: int) -> float:
    """Mean loss of the steps this run trained: after a resume the Trainer divides by all the build's steps."""
    if not resumed_from:
        return result.training_loss
    return result.training_loss * result.global_step / (result.global_step - resumed_from)


def user_cache() -> Path:
    """Built models shared by every checkout on the machine: ``$ACLM_CACHE``, else ``~/.cache/aclm``."""
    return Path(os.environ.get("ACLM_CACHE") or Path.home() / ".cache" / "aclm")


def pretrain_generator(out_dir: str | Path | None = None, data_dir: str | Path | None = None, seed: int = 0,
                       spec: dict | None = None, force: bool = False, checkpoint_seconds: float = CHECKPOINT_SECONDS,
                       cache: str | Path | None = None, kind: str = "mbart") -> tuple[dict, bool]:
    """Build (or reuse) ``out_dir/<MODEL_NAMES[kind]>``; return ``(manifest, rebuilt)``.

    With ``cache`` the build lives in ``<cache>/mini-generator/<fingerprint>`` and ``out_dir`` links to it,
    so other checkouts find it built. ``checkpoint_seconds=0``: a checkpoint every step.
    """
    from aclm.base.datasets import resolve_data_dir

    spec = merged_spec(spec, kind)
    out_dir = Path(out_dir or DEFAULT_OUT_DIRS[kind])
    data_dir = resolve_data_dir(str(data_dir) if data_dir else None)
    text, benchmark = text_files(data_dir, spec["languages"])
    base: list[Path] = []                                 # a warm start's checkpoint decides the weights too
    if kind == "bert2bert":
        from tools.warm_start import base_files

        base = base_files(spec)
    corpus = load_corpus(data_dir, spec)                 # a few seconds: the text as read is part of the fingerprint
    key = fingerprint(corpus[0], base, spec, seed)
    build = functools.partial(_build, text=text, benchmark=benchmark, base=base, corpus=corpus, key=key,
                              spec=spec, seed=seed, force=force, checkpoint_seconds=checkpoint_seconds)
    if cache is None:
        return build(out_dir)
    entry = Path(cache) / "mini-generator" / key
    entry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{entry}.lock"):                       # one build at a time, however many checkouts ask
        if (not is_up_to_date(entry, key, MODEL_NAMES[kind]) and not out_dir.is_symlink()
                and is_up_to_date(out_dir, key, MODEL_NAMES[kind])):
            shutil.rmtree(entry, ignore_errors=True)
            shutil.move(str(out_dir), entry)              # a build made here before the cache existed
        built = build(entry)
    if out_dir.is_symlink() or out_dir.is_file():
        out_dir.unlink()
    elif out_dir.exists():
        shutil.rmtree(out_dir)                            # an outdated build of its own
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    out_dir.symlink_to(entry.resolve(), target_is_directory=True)
    log.info("%s -> %s", out_dir, entry)
    return built


def mbart_tokenizer(folder: Path, train: Sequence[tuple[str, list[str]]], spec: dict) -> MBart50TokenizerFast:
    """The mBART-50 tokenizer over a SentencePiece vocabulary trained on ``train`` (once; a resume reuses it)."""
    if not (folder / "tokenizer_config.json").is_file():
        with atomic_dir(folder) as tmp:
            train_mbart50_tokenizer([" ".join(words) for _, words in train], tmp, spec["vocab_size"],
                                    spec["model_max_length"]).save_pretrained(tmp)
    return MBart50TokenizerFast.from_pretrained(folder)


def _build(out_dir: Path, text: list[Path], benchmark: list[Path], base: list[Path],
           corpus: tuple[dict[str, list[list[str]]], dict], key: str, spec: dict, seed: int, force: bool,
           checkpoint_seconds: float) -> tuple[dict, bool]:
    """The build itself, into ``out_dir`` (resumed when an unfinished one with the same inputs is there)."""
    start, cpu_start_all = time.perf_counter(), time.process_time()
    kind, model_name = kind_of(spec), MODEL_NAMES[kind_of(spec)]
    if not force and is_up_to_date(out_dir, key, model_name):
        return read_manifest(out_dir), False

    work = out_dir / WORK_NAME
    if force or not (work / "fingerprint").is_file() or (work / "fingerprint").read_text() != key:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "fingerprint").write_text(key)
    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)

    corpus, corpus_facts = corpus
    train, heldout = split_heldout(corpus, spec["heldout_share"], seed)
    if kind == "bert2bert":
        from tools.warm_start import warm_model, warm_tokenizer

        tokenizer = warm_tokenizer(spec)
        code = {lang: None for lang in spec["languages"]}  # no language codes: one language, none needed
        model = warm_model(tokenizer, spec, seed)
    else:
        tokenizer = mbart_tokenizer(work / "tokenizer", train, spec)
        code = {lang: mbart_code(lang) for lang in spec["languages"]}
        model = build_model(tokenizer, spec, seed)
    train_set = SentenceDataset([(code[lang], words) for lang, words in train])
    collator = DenoisingCollator(tokenizer, spec["max_length"], spec["noise"]["mask_ratio"],
                                 spec["noise"]["poisson_lambda"], seed)
    checkpoints = work / "checkpoints"
    last = last_checkpoint(checkpoints)
    resumed_from = int(last.name.split("-")[-1]) if last else 0
    if last:
        log.info("resuming the generator's pretraining from %s", last)
    trainer = PretrainingTrainer(model=model, args=training_arguments(spec, checkpoints, seed),
                                 train_dataset=train_set, data_collator=collator,
                                 callbacks=[SetEpoch(collator), CheckpointClock(checkpoint_seconds), StepSummary()],
                                 compute_metrics=token_accuracy, preprocess_logits_for_metrics=argmax_logits)
    show_progress(trainer, "pretrain generator")
    train_start, cpu_start = time.perf_counter(), time.process_time()
    result = run_training(trainer, last, checkpoints)
    train_seconds, train_cpu_seconds = time.perf_counter() - train_start, time.process_time() - cpu_start

    collator.epoch = 0                                   # held-out masks: fixed, one draw per sentence
    quality = {}
    heldout = sorted(heldout, key=lambda pair: len(pair[1]))       # similar lengths batched: less padding
    for name, subset in [("all", heldout), *((lang, [p for p in heldout if p[0] == lang]) for lang in code)]:
        metrics = trainer.evaluate(SentenceDataset([(code[lang], words) for lang, words in subset]))
        quality[name] = {"sentences": len(subset), "loss": round(metrics["eval_loss"], 4),
                         "token_accuracy": round(metrics["eval_token_accuracy"], 4)}
    log.info("held-out denoising loss %.4f, token accuracy %.4f", quality["all"]["loss"],
             quality["all"]["token_accuracy"])

    target = out_dir / model_name
    with atomic_dir(target) as tmp:
        if kind == "mbart":
            model.config.dropout = spec["finetune_dropout"]
        trainer.save_model(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "training_args.bin").unlink(missing_ok=True)
        tmp.chmod(0o755)                                  # a scratch folder starts private
    manifest = {
        "fingerprint": key,
        "code": build_code(kind),
        "seed": seed,
        "spec": spec,
        "model": {"path": model_name, "kind": kind, "parameters": _n_params(model), "vocab_size": len(tokenizer),
                  "bytes": sum(f.stat().st_size for f in target.rglob("*") if f.is_file())},
        **({"base": [_display(p) for p in base]} if base else {}),
        "text": {"files": [_display(p) for p in text], "left_out_if_in": [_display(p) for p in benchmark],
                 "sentences": corpus_facts, "train_sentences": len(train), "heldout_sentences": len(heldout)},
        "steps": trainer.state.global_step,
        "epochs": round(trainer.state.epoch or 0.0, 3),
        "train_loss": round(trained_loss(result, resumed_from), 4),
        "resumed_from_step": resumed_from,
        "train_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(train_cpu_seconds, 1),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "cpu_seconds": round(time.process_time() - cpu_start_all, 1),
        "threads": torch.get_num_threads(),
        "heldout": quality,
        "versions": versions(),
    }
    write_json(out_dir / MANIFEST_NAME, manifest)
    shutil.rmtree(work, ignore_errors=True)
    return manifest, True
