"""The ACLM chain end to end on the bundled sample with the tiny models (CPU)."""

from __future__ import annotations

import shutil

import pytest

from aclm import experiment as ex
from aclm import pipeline
from aclm.io import read_json
from aclm.methods import run_method
from aclm.stages import STAMP

STAGE_FILES = {
    "s2_keywords": ["train.jsonl", "dev.jsonl"],
    "s3_templates": ["train.jsonl", "dev.jsonl"],
    "s4_generator": ["config.json", "model.safetensors", "tokenizer.json"],
    "s5_generate": ["generations.jsonl"],
    "s6_postprocess": ["aug.conll", "gold+aug.conll", "report.json"],
    "s7_ner": ["result.json", "best-model.pt"],
}


def stamps(cfg) -> dict[str, str]:
    dirs = [ex.data_dir(cfg), ex.s1_dir(cfg)] + [ex.method_dir(cfg) / s for s in STAGE_FILES]
    return {d.name: (d / STAMP).read_text() for d in dirs if (d / STAMP).exists()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, fast):
    cfg = fast(tmp_path_factory.mktemp("runs"), "method=aclm")
    run_method(cfg)
    return cfg


def test_every_artifact_is_written(finished):
    for stage, files in STAGE_FILES.items():
        for name in files:
            assert (ex.method_dir(finished) / stage / name).exists(), f"{stage}/{name}"
    result = read_json(ex.method_dir(finished) / "s7_ner" / "result.json")
    assert result["method"] == "aclm" and result["dataset"] == "sample/en"
    assert set(result["timings"]) >= {"s1_ner", "s2_keywords", "s4_generator", "s5_generate", "s7_ner"}
    report = result["augmentation"]
    assert report["generation"]["generated"] == 2 * report["gold"]          # R = 2 rounds per sentence
    assert report["added"] == report["postprocess"]["kept"]
    assert result["sizes"]["train"] == report["gold"] + report["added"]


def test_rerun_does_no_work(finished):
    before = stamps(finished)
    run_method(finished)
    assert stamps(finished) == before


def test_deleting_a_stage_reruns_it_and_the_later_ones_only(finished):
    before = stamps(finished)
    shutil.rmtree(ex.method_dir(finished) / "s3_templates")
    run_method(finished)
    after = stamps(finished)
    for kept in ("data", "s1_ner", "s2_keywords"):
        assert after[kept] == before[kept], kept
    for rerun in ("s3_templates", "s4_generator", "s5_generate", "s6_postprocess", "s7_ner"):
        assert after[rerun] != before[rerun], rerun


def test_same_seed_gives_identical_templates_and_generations(finished, fast, tmp_path):
    again = fast(tmp_path, "method=aclm")
    pipeline.generate_stage(again)
    for stage, name in (("s3_templates", "train.jsonl"), ("s5_generate", "generations.jsonl")):
        first = (ex.method_dir(finished) / stage / name).read_bytes()
        assert (ex.method_dir(again) / stage / name).read_bytes() == first, stage


def test_gold_only_result(finished):
    result = read_json(ex.s1_dir(finished) / "result.json")
    assert result["method"] == "gold_only"
    assert 0.0 <= result["f1"] <= 100.0
    assert set(result["per_length"]) == {"len_lt5", "len_5_10", "len_ge10"}
    assert result["config"]["ner"]["model"] == "models/tiny/xlm-roberta"
    assert "torch" in result["versions"] and result["config_hash"]


def test_multilingual_union(fast, tmp_path):
    cfg = fast(tmp_path, "method=aclm", "dataset=sample/multi")
    result = read_json(run_method(cfg) / "result.json")
    assert set(result["test"]) == {"sample/en", "sample/de"}
    languages = read_json(ex.data_dir(cfg) / "languages.json")["train"]
    assert languages.count("en") == 60 and languages.count("de") == 20
    tokenizer_config = read_json(ex.method_dir(cfg) / "s4_generator" / "tokenizer_config.json")
    assert tokenizer_config["src_lang"] in ("en_XX", "de_DE")


def test_generation_batches_hold_one_language():
    from aclm.generation import Job, batches

    jobs = [Job(i, 0, None, "x" * (i % 3 + 1)) for i in range(7)]
    codes = ["en_XX", "de_DE", "en_XX", "de_DE", "en_XX", "en_XX", "de_DE"]
    out = batches(jobs, codes, size=2)
    assert sorted(j for b in out for j in b) == list(range(7))
    assert all(len({codes[j] for j in b}) == 1 and len(b) <= 2 for b in out)
    assert [len(jobs[j].template) for j in out[0]] == sorted((len(jobs[j].template) for j in out[0]), reverse=True)
