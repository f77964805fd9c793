"""The tagger recipes: schedules, early stopping and reprojection as the config says."""

from __future__ import annotations

import pytest
from flair.trainers.plugins import AnnealingPlugin, LinearSchedulerPlugin, TrainingInterrupt


from aclm.base.config import load_config
from aclm.steps.ner import EarlyStopping, build_tagger, schedule_plugins


def test_schedules_follow_the_config(tmp_path):
    ner = load_config().ner
    assert [type(p) for p in schedule_plugins(ner, tmp_path)] == [AnnealingPlugin]
    ner.schedule, ner.early_stopping = "linear", None
    assert [type(p) for p in schedule_plugins(ner, tmp_path)] == [LinearSchedulerPlugin]
    wikineural = load_config(config_files=["configs/taggers/wikineural.yaml"]).ner
    assert [type(p) for p in schedule_plugins(wikineural, tmp_path)] == [EarlyStopping]   # constant lr
    assert (wikineural.optimizer, wikineural.lr, wikineural.early_stopping) == ("adam", 1e-3, 10)


def test_early_stopping_after_patience_epochs_without_a_new_best():
    stop = EarlyStopping(patience=3)
    for best in (True, False, False, True, False, False):      # a new best resets the count
        stop.after_evaluation(current_model_is_best=best)
    with pytest.raises(TrainingInterrupt):
        stop.after_evaluation(current_model_is_best=False)


@pytest.mark.parametrize("config_files, reproject", [([], True), (["configs/taggers/wikineural.yaml"], False)])
def test_reprojection_as_the_config_says(tiny_models, config_files, reproject):
    cfg = load_config(["profile=tiny"], config_files)
    tagger = build_tagger(cfg.ner, ["PER", "LOC"])
    assert hasattr(tagger, "embedding2nn") == reproject
    cfg.ner.reproject_embeddings = not reproject
    assert hasattr(build_tagger(cfg.ner, ["PER", "LOC"]), "embedding2nn") == (not reproject)


def test_mixed_precision_follows_ner_use_amp(monkeypatch):
    import flair
    import torch


    from aclm.base.config import ConfigError
    from aclm.engine.identity import hashed, view
    from aclm.steps.ner import amp

    ner = load_config().ner
    assert ner.use_amp == "auto" and load_config(["profile=reference_code"]).ner.use_amp is False
    monkeypatch.setattr(flair, "device", torch.device("cpu"))
    assert not amp(ner)
    monkeypatch.setattr(flair, "device", torch.device("cuda"))
    assert amp(ner)                                                   # auto: on CUDA
    assert not amp(load_config(["ner.use_amp=false"]).ner)
    with pytest.raises(ConfigError, match="ner.use_amp"):
        load_config(["ner.use_amp=sometimes"])
    s1_reads = ("ner", "seed")                                        # S1 and S7 fingerprint it
    assert hashed(view(load_config(["ner.use_amp=false"]), s1_reads)) != hashed(view(load_config(), s1_reads))


def test_a_result_says_which_of_its_taggers_learned_nothing(tmp_path):
    """Under ner.on_no_learning=warn a run goes on past a tagger with dev F1 0; its scores say so."""
    import json

    from aclm.stages import layout
    from aclm.stages.scores import learned_nothing

    chain = {}
    for name, dev_f1 in ((layout.DATA, None), (layout.S1, 0.0), (layout.S7, 31.5)):
        chain[name] = tmp_path / name
        chain[name].mkdir()
        (chain[name] / "_stage.json").write_text(json.dumps({"facts": {"dev_f1": dev_f1}}))
    assert learned_nothing(chain) == ["S1's tagger learned nothing (dev F1 0; ner.on_no_learning=warn let the run "
                                      "finish)"]
    assert learned_nothing({layout.S1: chain[layout.S7]}) == []
