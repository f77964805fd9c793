"""S4 keeps its best epoch's weights in memory instead of the trainer's checkpoints, and that changes no result.

:class:`aclm.steps.generator.KeepBestWeights` copies the weights at the lowest dev
loss and puts them back when training ends; the trainer's own way wrote a
checkpoint (weights and optimizer state) every epoch and read the best one back.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import TrainerCallback

from aclm.stages import layout
from aclm.run.chain import run_method
from aclm.engine import stamp
from aclm.steps import generator


def tied_model() -> torch.nn.Module:
    """An embedding and an output layer sharing one weight, as mBART's embeddings and LM head do."""
    model = torch.nn.Sequential(torch.nn.Embedding(4, 3), torch.nn.Linear(3, 4))
    model[1].weight = model[0].weight
    return model


def test_the_weights_of_the_first_lowest_dev_loss_come_back_and_tied_weights_stay_tied():
    model, keep, seen = tied_model(), generator.KeepBestWeights(), []
    for loss in (3.0, 2.0, 2.0, 2.5):                 # the trainer keeps the first of equal losses
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
        keep.on_evaluate(None, None, None, metrics={"eval_loss": loss}, model=model)
    keep.on_train_end(None, None, None, model=model)
    assert all(torch.equal(v, seen[1][k]) for k, v in model.state_dict().items())
    assert sorted(keep.weights) == ["0.weight", "1.bias"]            # the shared weight copied once
    assert model[1].weight is model[0].weight


def trainer_checkpoints(training_arguments):
    """The recipe as it was: a checkpoint every epoch, the best one by dev loss loaded at the end."""
    def args(*a, **kw):
        return dataclasses.replace(training_arguments(*a, **kw), save_strategy="epoch", save_total_limit=1,
                                   load_best_model_at_end=True, metric_for_best_model="eval_loss",
                                   greater_is_better=False)

    return args


@pytest.mark.slow
def test_the_generator_is_the_one_the_trainers_checkpoints_gave(fast, tmp_path, monkeypatch):
    # restoring counts only where the best epoch is not the last: the tiny generator's dev loss is lowest at
    # epoch 4 of these 8; at lr 0.3 over 4 epochs it was lowest at epoch 3 on one CPU and at the last on another
    overrides = ("method=aclm", "generator.epochs=8", "generator.lr=0.05")
    ours = run_method(fast(tmp_path / "ours", *overrides), until=layout.S4)[layout.S4]
    monkeypatch.setattr(generator, "training_arguments", trainer_checkpoints(generator.training_arguments))
    monkeypatch.setattr(generator, "KeepBestWeights", TrainerCallback)
    theirs = run_method(fast(tmp_path / "trainer", *overrides), until=layout.S4)[layout.S4]
    best = stamp(ours)["facts"]["best_epoch"]
    assert best == stamp(theirs)["facts"]["best_epoch"] and best < 8, best
    for name in ("model.safetensors", "loss.tsv"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
