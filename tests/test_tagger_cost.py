"""The tagger's cuts of what is not the model's arithmetic change no result.

:func:`aclm.steps.ner.train_tagger` keeps the best epoch's weights in
memory and writes ``best-model.pt`` once, asks flair for no dev predictions
file per epoch, and turns sub-token states into words a batch at a time
(:mod:`aclm.steps.subtokens`).  Each test trains twice from one seed, once that
way and once on flair's own path (the best model written at every
improvement and read back at the end, ``dev.tsv`` every epoch, its
per-sentence loops), and compares the per-epoch dev scores of ``loss.tsv``
and the final model's predictions.
"""

from __future__ import annotations

import csv
import functools
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from unittest.mock import patch

import pytest


from aclm.base.config import load_config
from aclm.base.datasets import load_split
from aclm.base.runtime import seed_everything

TINY = ["profile=tiny", "ner.epochs=6"]   # a random tiny encoder predicts only O: its dev losses are what differ
# the mini encoder with a recipe that learns within a few epochs, so that the best dev epoch is chosen among several
MINI = ["profile=mini", "ner.epochs=5", "ner.optimizer=adamw", "ner.lr=5e-5", "ner.schedule=linear"]


def train_twice(tmp_path: Path, overrides: list[str], dataset: str, n_train: int, n_dev: int,
                data_dir: Path | None = None) -> tuple[dict, dict]:
    from flair.trainers import ModelTrainer

    cfg = load_config([*overrides, f"dataset={dataset}"])
    train = load_split(dataset, "train", data_dir)[:n_train]
    dev = load_split(dataset, "dev", data_dir)[:n_dev]
    types = sorted({t for s in train + dev for _, _, t in s.spans()})
    flair_train = ModelTrainer.train_custom
    runs = {}
    for name in ("ours", "flair"):
        with ExitStack() as stack:
            if name == "flair":
                stack.enter_context(patch("aclm.steps.ner.no_dev_predictions_file", lambda tagger: nullcontext()))
                stack.enter_context(patch("aclm.steps.ner.BestInMemory.restore", lambda self, tagger: None))
                stack.enter_context(patch("aclm.steps.ner.batched_subtokens", nullcontext))
                stack.enter_context(patch.object(ModelTrainer, "train_custom", best_model_file(flair_train)))
            runs[name] = train_once(cfg.ner, train, dev, types, tmp_path / name)
    return runs["ours"], runs["flair"]


def best_model_file(train_custom):
    """flair's ``train_custom`` writing best-model.pt at every improvement (its signature kept: flair reads it)."""
    @functools.wraps(train_custom)
    def train(self, **kwargs):
        return train_custom(self, **{**kwargs, "use_final_model_for_eval": False})

    return train


def train_once(ner, train, dev, types, out: Path) -> dict:
    from aclm.steps.ner import load_tagger, predict_tags, train_tagger

    seed_everything(1)
    model, facts = train_tagger(ner, train, dev, types, out)
    with (out / "loss.tsv").open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    dev_columns = [{k: v for k, v in row.items() if k.startswith("DEV")} for row in rows]
    return {"dev": dev_columns, "predicted": predict_tags(load_tagger(model), dev), "facts": facts,
            "dev_file": (out / "dev.tsv").exists()}


def check_identical(ours: dict, flair: dict) -> None:
    assert flair["dev_file"] and not ours["dev_file"]            # the reference did take flair's own path
    assert ours["dev"] and ours["dev"] == flair["dev"]           # every epoch's dev loss and F1
    assert ours["predicted"] == flair["predicted"]
    assert ours["facts"]["epochs_trained"] == flair["facts"]["epochs_trained"]


@pytest.mark.slow
def test_tiny_tagger_scores_and_predicts_as_on_flairs_path(tiny_models, tmp_path):
    ours, flair = train_twice(tmp_path, TINY, "sample/en", 200, 60)
    check_identical(ours, flair)


@pytest.mark.real_weights
def test_mini_tagger_scores_and_predicts_as_on_flairs_path(shared_data, tmp_path):
    ours, flair = train_twice(tmp_path, MINI, "multiconer/en", 100, 200, shared_data)
    check_identical(ours, flair)
    assert any(tag != "O" for tags in ours["predicted"] for tag in tags)      # it learned: a best epoch was chosen
    assert max(float(row["DEV_F1"]) for row in ours["dev"]) > 0


def subtoken_batch(generator, sentences: int = 6, positions: int = 20, dim: int = 8):
    """Random sub-token states and word ids as flair lays them out: -100 for special tokens and padding,
    each word over one or two sub-tokens."""
    import torch

    word_ids = torch.full((sentences, positions), -100)
    for i in range(sentences):
        ids = [w for w in range(int(torch.randint(1, 9, (), generator=generator)))
               for _ in range(int(torch.randint(1, 3, (), generator=generator)))]
        word_ids[i, 1:1 + len(ids)] = torch.tensor(ids)
    lengths = word_ids.max(dim=1).values + 1
    return torch.randn(sentences, positions, dim, generator=generator), word_ids, lengths


def test_batched_subtokens_copy_what_flairs_loops_copy():
    """Bitwise flair's functions, on the batched path and on the fallbacks (a sentence over two windows, a
    word without sub-tokens), which call flair's own loop."""
    import torch

    from aclm.steps import subtokens

    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        states, word_ids, lengths = subtoken_batch(generator)
        one_window = torch.arange(len(states))
        for values, default in ((states, 0), (word_ids, -100)):
            assert torch.equal(subtokens.combine_windows(values, one_window, 4, 32, default),
                               subtokens.FLAIR_COMBINE(values, one_window, 4, 32, default))
        split = torch.tensor([0, 0, 1, 2, 3, 4])                    # the first sentence over two windows
        with batched_path_counter(subtokens) as calls:
            subtokens.combine_windows(states, split, 4, 20, 0)
        assert calls["flair"] == 1
        starts = torch.ones_like(word_ids[:, :1], dtype=torch.bool)
        changes = word_ids[:, 1:] != word_ids[:, :-1]
        no_first = word_ids.clone()
        no_first[0][no_first[0] == 0] = -100                       # sentence 0's first word has no sub-token
        for mask, ids, batched in ((torch.cat([starts, changes], 1), word_ids, True),
                                   (torch.cat([changes, starts], 1), word_ids, True),
                                   (torch.cat([starts, changes], 1), no_first, False)):
            empty = torch.zeros(len(states), int(lengths.max()), states.shape[2])
            with batched_path_counter(subtokens) as calls:
                ours = subtokens.fill_words(empty.clone(), states, mask, ids, lengths)
            assert (calls["flair"] == 0) == batched
            assert torch.equal(ours, subtokens.FLAIR_FILL(empty.clone(), states, mask, ids, lengths))


def test_a_taggers_word_embeddings_are_flairs_with_batched_subtokens(tiny_models):
    """The tiny tagger's embeddings of real sentences, one longer than the encoder's window, are bitwise the
    same with and without :func:`batched_subtokens`; the short batch takes the batched path."""
    import torch
    from flair.data import Sentence

    from aclm.steps import subtokens
    from aclm.steps.ner import build_tagger

    embeddings = build_tagger(load_config(["profile=tiny"]).ner, ["PER", "LOC"]).embeddings
    embeddings.eval()
    short = [Sentence(s.tokens) for s in load_split("sample/en", "dev")[:16]]
    long = [Sentence(["word", *"abcdefghijklmnopqrstuvwxyz"] * 30), Sentence(["a", "b"])]

    def embedded(sentences):
        for sentence in sentences:
            sentence.clear_embeddings()
        with torch.no_grad():
            embeddings.embed(sentences)
        return [torch.stack([t.get_embedding() for t in s]) for s in sentences]

    for batch, batched in ((short, True), (long, False)):
        flairs = embedded(batch)
        with batched_path_counter(subtokens) as calls, subtokens.batched_subtokens():
            ours = embedded(batch)
        assert all(torch.equal(a, b) for a, b in zip(ours, flairs))
        assert (calls["flair"] == 0) == batched and calls["ours"] > 0


@contextmanager
def batched_path_counter(subtokens):
    """How often the batched functions ran, and how often they fell back to flair's loops."""
    calls = {"ours": 0, "flair": 0}

    def counted(function, key):
        def call(*args):
            calls[key] += 1
            return function(*args)
        return call

    with patch.multiple(subtokens, FLAIR_COMBINE=counted(subtokens.FLAIR_COMBINE, "flair"),
                        FLAIR_FILL=counted(subtokens.FLAIR_FILL, "flair"),
                        combine_windows=counted(subtokens.combine_windows, "ours"),
                        fill_words=counted(subtokens.fill_words, "ours")):
        yield calls


def test_best_in_memory_keeps_the_best_epochs_weights():
    """Weights copied when the epoch is best, not after; a later worse epoch does not overwrite them."""
    import torch

    from aclm.steps.ner import BestInMemory

    model = torch.nn.Linear(2, 2)
    plugin = BestInMemory()
    with patch.object(BestInMemory, "model", model):
        for value, best in ((1.0, True), (2.0, True), (3.0, False)):
            with torch.no_grad():
                model.weight.fill_(value)
            plugin.after_evaluation(current_model_is_best=best)
    plugin.restore(model)
    assert torch.all(model.weight == 2.0)


def test_a_taggers_epochs_scale_with_the_warm_up_counted_once():
    """The S1 of the GPU check on one H100 (10 epochs of 100): the first epoch's 13 s of warm-up is paid once."""
    from tools.stage_costs import tagger_parts

    epochs = [{"epoch": 1, "train": 13.0, "dev": 1.0, "save": 0.0}] + [
        {"epoch": i, "train": 1.6, "dev": 1.2, "save": 0.0} for i in range(2, 11)]
    measured = 20.0 + sum(e["train"] + e["dev"] for e in epochs)          # 20 s outside the epochs
    parts = tagger_parts(100, measured, {"epoch_seconds": epochs})
    assert parts == pytest.approx({"once": 20.0 + 11.2, "train": 100 * 1.6, "dev": 100 * 1.2})
    assert tagger_parts(100, 5.0, {"epoch_seconds": epochs[:1]}) is None      # one epoch: nothing to scale by
