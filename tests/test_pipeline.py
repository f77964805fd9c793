"""The ACLM chain end to end on the bundled sample with the tiny models (CPU)."""

from __future__ import annotations

import shutil

import pytest

from aclm.base.io import read_json
from aclm.experiments.grid import PRUNING as GRID_PRUNING
from aclm.stages import layout
from aclm.run.chain import run_to_result, run_method
from aclm.stages.layout import RunLayout
from aclm.engine import STAMP
from aclm.engine.stages import pruned_files
from conftest import f1_of_predictions, logged_steps

STAGE_FILES = {
    layout.S2: ["train.jsonl", "dev.jsonl"],
    layout.S3: ["train.jsonl", "dev.jsonl"],
    layout.S4: ["config.json", "tokenizer.json"],
    layout.S5: ["generations.jsonl"],
    layout.S6: ["aug.conll", "gold+aug.conll", "report.json"],
    layout.S7: ["loss.tsv"],
    layout.S7_EVAL: ["result.json", "predictions/sample_en.conll"],
}


def stamps(cfg) -> dict[str, str]:
    run = RunLayout.of(cfg)
    dirs = [run.stage(s) for s in (layout.DATA, layout.S1, layout.S1_EVAL, *STAGE_FILES)]
    return {d.name: (d / STAMP).read_text() for d in dirs if (d / STAMP).exists()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fast):
    cfg = fast(tmp_path_factory.mktemp("runs"), "method=aclm", *GRID_PRUNING)
    run_method(cfg)
    return cfg


def test_the_chain_runs_in_order_and_writes_every_artifact(finished):
    done = run_method(finished)
    assert list(done) == [layout.DATA, layout.S1, layout.S2, layout.S3, layout.S4, layout.S5, layout.S6,
                          layout.S7, layout.S7_EVAL]
    run = RunLayout.of(finished)
    for stage, files in STAGE_FILES.items():
        for name in files:
            assert (run.stage(stage) / name).exists(), f"{stage}/{name}"
    result = read_json(run.result_path)
    assert result["method"] == "aclm" and result["dataset"] == "sample/en"
    assert set(result["timings"]) >= {layout.S1, layout.S2, layout.S4, layout.S5, layout.S7}
    report = result["augmentation"]
    assert report["generation"]["generated"] == 2 * report["gold"]          # R = 2 rounds per sentence
    assert report["added"] == report["postprocess"]["kept"]
    assert result["sizes"]["train"] == report["gold"] + report["added"]
    # the result records the config every stage of its chain read, and nothing else
    assert result["config"]["keywords"]["p"] == 0.3 and result["config"]["generation"]["rounds"] == 2
    assert "melm" not in result["config"] and "daga" not in result["config"]


def test_model_weights_are_pruned_once_their_outputs_are_written(finished):
    run = RunLayout.of(finished)
    assert set(pruned_files(run.stage(layout.S4))) == {"model.safetensors"}
    assert set(pruned_files(run.stage(layout.S7))) == {"best-model.pt"}
    assert not list(run.method_dir.rglob("*.safetensors")) and not list(run.method_dir.rglob("*.pt"))
    assert (run.stage(layout.S1) / layout.MODEL).exists()                    # the setting's other methods need S1


def test_a_pruned_model_needed_again_is_rebuilt_first(finished, fast):
    run = RunLayout.of(finished)
    before = stamps(finished)
    rescored = fast(run.run_dir, "method=aclm", "test_datasets=[sample/de]", *GRID_PRUNING)  # new scores, same S7
    result = read_json(run_to_result(rescored) / layout.RESULT)
    assert set(result["test"]) == {"sample/en", "sample/de"}
    after = stamps(finished)
    assert after[layout.S5] == before[layout.S5] and after[layout.S7] != before[layout.S7]
    assert pruned_files(run.stage(layout.S7))                                 # and pruned again
    run_method(finished)                                                      # back to the first config: re-scores


def test_a_single_run_keeps_its_final_tagger_and_drops_its_generator(fast, tmp_path):
    cfg = fast(tmp_path, "method=aclm")
    run = RunLayout.of(cfg)
    run_method(cfg)
    assert (run.stage(layout.S7) / layout.MODEL).exists() and not pruned_files(run.stage(layout.S7))
    assert set(pruned_files(run.stage(layout.S4))) == {"model.safetensors"}


def test_keep_models_keeps_them(fast, tmp_path):
    cfg = fast(tmp_path, "method=aclm", "storage.keep_models=true")
    run = RunLayout.of(cfg)
    run_method(cfg)
    assert (run.stage(layout.S4) / "model.safetensors").exists() and (run.stage(layout.S7) / layout.MODEL).exists()
    assert not pruned_files(run.stage(layout.S4)) and not pruned_files(run.stage(layout.S7))


def test_rerun_does_no_work(finished):
    before = stamps(finished)
    run_method(finished)
    assert stamps(finished) == before


def test_deleting_a_stage_reruns_it_and_the_later_ones_only(finished):
    before = stamps(finished)
    shutil.rmtree(RunLayout.of(finished).stage(layout.S3))
    run_method(finished)
    after = stamps(finished)
    for kept in (layout.DATA, layout.S1, layout.S2):
        assert after[kept] == before[kept], kept
    for rerun in (layout.S3, layout.S4, layout.S5, layout.S6, layout.S7, layout.S7_EVAL):
        assert after[rerun] != before[rerun], rerun


def test_same_seed_gives_identical_templates_and_generations(finished, fast, tmp_path):
    again = fast(tmp_path, "method=aclm")
    run_method(again, until=layout.S5)
    for stage, name in ((layout.S3, "train.jsonl"), (layout.S5, "generations.jsonl")):
        first = (RunLayout.of(finished).stage(stage) / name).read_bytes()
        assert (RunLayout.of(again).stage(stage) / name).read_bytes() == first, stage


def test_gold_only_result(finished, fast):
    gold_only = fast(RunLayout.of(finished).run_dir, "method=gold_only")
    before = stamps(finished)
    assert list(run_method(gold_only)) == [layout.DATA, layout.S1, layout.S1_EVAL]
    assert stamps(finished)[layout.S1] == before[layout.S1]                 # ACLM's S1 is Gold-only's
    result = read_json(RunLayout.of(finished).of_method(layout.GOLD_ONLY).result_path)
    assert result["method"] == "gold_only"
    assert result["f1"] == pytest.approx(f1_of_predictions(RunLayout.of(finished).stage(layout.S1_EVAL), "sample/en"))
    assert set(result["per_length"]) == {"len_lt5", "len_5_10", "len_ge10"}
    assert result["config"]["ner"]["model"] == "models/tiny/xlm-roberta"
    assert "torch" in result["versions"] and result["config_hash"]


def test_multilingual_union(fast, tmp_path):
    cfg = fast(tmp_path, "method=aclm", "dataset=sample/multi")
    result = read_json(run_to_result(cfg) / "result.json")
    assert set(result["test"]) == {"sample/en", "sample/de"}
    run = RunLayout.of(cfg)
    languages = read_json(run.data / "languages.json")["train"]
    assert languages.count("en") == 60 and languages.count("de") == 20
    tokenizer_config = read_json(run.stage(layout.S4) / "tokenizer_config.json")
    assert tokenizer_config["src_lang"] in ("en_XX", "de_DE")


def test_generation_batches_hold_one_language():
    from aclm.steps.generation import Job, batches

    jobs = [Job(i, 0, None, "x" * (i % 3 + 1)) for i in range(7)]
    codes = ["en_XX", "de_DE", "en_XX", "de_DE", "en_XX", "en_XX", "de_DE"]
    out = batches(jobs, codes, size=2)
    assert sorted(j for b in out for j in b) == list(range(7))
    assert all(len({codes[j] for j in b}) == 1 and len(b) <= 2 for b in out)
    assert [len(jobs[j].template) for j in out[0]] == sorted((len(jobs[j].template) for j in out[0]), reverse=True)


def test_the_generator_keeps_its_losses_per_epoch(finished):
    from aclm.steps.generator import epoch_losses

    table = (RunLayout.of(finished).stage(layout.S4) / "loss.tsv").read_text().splitlines()
    assert table[0] == "EPOCH\tTRAIN_LOSS\tDEV_LOSS" and len(table) == 1 + finished.generator.epochs
    history = [{"loss": 2.0, "epoch": 0.5}, {"loss": 1.0, "epoch": 1.0}, {"eval_loss": 1.5, "epoch": 1.0},
               {"eval_loss": 1.2, "epoch": 2.0}]                     # epoch 2 logged no training loss
    assert epoch_losses(history) == [{"epoch": 1.0, "train_loss": 1.5, "dev_loss": 1.5},
                                     {"epoch": 2.0, "train_loss": None, "dev_loss": 1.2}]


def logged_counts(folder) -> dict[str, int]:
    """Each scalar tag of the TensorBoard event files in ``folder``, with how many values it holds."""
    return {tag: len(steps) for tag, steps in logged_steps(folder).items()}


def test_every_model_the_chain_trains_leaves_tensorboard_events(finished):
    run = RunLayout.of(finished)
    for stage, model in ((layout.S1, "tagger"), (layout.S7, "tagger")):
        tags = logged_counts(run.stage(stage) / "tensorboard" / model)
        epochs = read_json(run.stage(stage) / STAMP)["facts"]["training"]["epochs_trained"]
        assert tags["train/loss"] == tags["dev/micro avg/f1-score"] == epochs, stage
    tags = logged_counts(run.stage(layout.S4) / "tensorboard" / "generator")
    assert tags["eval/loss"] == finished.generator.epochs and tags["train/train_loss"] == 1
    # a view of training, not its product: not in the stage's listing, so deleting it re-runs nothing
    assert not any(name.startswith("tensorboard") for name in read_json(run.stage(layout.S4) / STAMP)["outputs"])
    before = stamps(finished)
    shutil.rmtree(run.stage(layout.S4) / "tensorboard")
    run_method(finished)
    assert stamps(finished) == before
