"""JOBS=auto: how many runs one GPU holds, from measured CUDA peaks (made-up ones here) and the card's free memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments import packing
from aclm.experiments.packing import language_need, measured_needs, need_mb, paper_need, runs_per_gpu, stage_needs
from aclm.engine.memory import CONTEXT_MB

FREE = 50_000                                             # MB free on a made-up card
GOLD_ONLY = ("data", "s1_ner", "s1_eval")
ACLM = (*GOLD_ONLY, "s2_keywords", "s3_templates", "s4_generator", "s5_generation", "s6_postprocess", "s7_ner",
        "s7_eval")
#: Made-up measurements: a new GPU check rewrites configs/gpu_peaks.json, and these tests must still hold.
PEAKS = {"reference_dataset": "multiconer/en", "process_factor": 1.25,
         "cuda_peak_mb": {"data": 0, "s1_ner": 4000, "s1_eval": 2000, "s2_keywords": 1000, "s3_templates": 10,
                          "s4_generator": 10000, "s5_generation": 4400, "augment": 10000, "s6_postprocess": 0,
                          "s7_ner": 4000, "s7_eval": 2000},
         "in_use_over_peak_mb": {"s4_generator": [20000, 10000], "augment": [20000, 10000]},
         "fixed_mb": {"s4_generator": 6000, "augment": 6000, "s5_generation": 2000}}


@pytest.fixture(autouse=True)
def made_up_peaks(tmp_path, monkeypatch):
    path = tmp_path / "gpu_peaks.json"
    path.write_text(json.dumps(PEAKS))
    monkeypatch.setattr(packing, "PEAKS_FILE", path)


def test_gold_only_packs_by_what_s1s_process_holds_and_aclm_by_s4s():
    assert need_mb(GOLD_ONLY, {}) == (5000, "s1_ner, at paper size (GPU check)")      # 4,000 MB peak x 1.25
    assert need_mb(ACLM, {})[0] == 20000                  # S4's process as measured in use, not 10,000 x 1.25
    assert runs_per_gpu(FREE, need_mb(ACLM, {})[0], cpus=16) == 2            # 2 x 20 GB fit in 47.5 GB, 3 do not
    assert runs_per_gpu(FREE, need_mb(GOLD_ONLY, {})[0], cpus=16) == 9
    assert runs_per_gpu(FREE, 5000, cpus=2) == 2                               # one run per core at most
    assert runs_per_gpu(1000, 20000, cpus=16) == 1                             # never 0: one run always starts
    assert need_mb(("augment",), {})[0] == 20000                               # MulDA fine-tunes the same mBART-50
    assert need_mb(("unheard_of",), {})[0] == 20000                            # unmeasured: the largest


def test_the_ledger_lets_as_many_s4s_run_at_once_as_their_in_use_memory_fits():
    capacity, needs = FREE * 0.95, stage_needs(ACLM, {})
    assert 2 * needs["s4_generator"] <= capacity < 3 * needs["s4_generator"]
    assert "s6_postprocess" not in needs and "data" not in needs                # CPU stages lease nothing


def test_the_committed_measurements_are_complete():
    committed = json.loads((PROJECT_ROOT / "configs" / "gpu_peaks.json").read_text())
    assert set(committed) >= set(PEAKS) and set(committed["cuda_peak_mb"]) >= set(ACLM) | {"augment"}
    assert set(committed["fixed_mb"]) <= set(committed["cuda_peak_mb"])


def test_a_stages_measured_need_replaces_its_paper_size_one(tmp_path):
    assert measured_needs(tmp_path, "mini") == {}
    for folder, memory in (("seed1/s1_ner", {"cuda_peak_mb": 900}), ("seed2/s1_ner", {"cuda_peak_mb": 1100}),
                           ("seed1/aclm/s4_generator", {"cuda_peak_mb": 2000}),
                           ("seed2/aclm/s2_keywords", {"cuda_peak_mb": 1000, "cuda_reserved_mb": 2000}),
                           ("seed1/aclm/s6_postprocess", {"cuda_peak_mb": None})):
        stage = tmp_path / "mini" / "multiconer" / "en" / "gold100" / folder
        stage.mkdir(parents=True)
        (stage / "_stage.json").write_text(json.dumps({"memory": memory}))
    other = tmp_path / "paper" / "s1_ner"
    other.mkdir(parents=True)
    (other / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": 90000}}))
    measured = measured_needs(tmp_path, "mini")
    assert measured == {"s1_ner": 1375, "s4_generator": 2000 * 2,
                        "s2_keywords": 2000 + CONTEXT_MB}          # the allocator's reserve where larger
    assert need_mb(ACLM, measured) == (5500, "s5_generation, at paper size (GPU check)")   # S5 never ran here
    assert need_mb(GOLD_ONLY, measured) == (2500, "s1_eval, at paper size (GPU check)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_jobs_says_one_at_a_time(tmp_path):
    done = subprocess.run([sys.executable, "scripts/grid.py", "jobs", "mini_table1", "profile=mini",
                           f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1"
    assert "no GPU visible" in done.stderr


def test_s4_and_s5_need_more_in_a_language_whose_batches_pad_longer(tmp_path):
    assert language_need("s4_generator", 1.0) == paper_need("s4_generator") == 20000
    zh = language_need("s4_generator", 2.0)              # weights and Adam's moments stay, the activations double
    assert zh == (6000 + 2 * 4000) * 2
    needs = stage_needs(ACLM, {}, {"zh": 2.0, "en": 1.0})
    assert needs["s4_generator@zh"] == zh and needs["s4_generator@en"] == 20000
    assert needs["s5_generation@zh"] > needs["s5_generation"] and "s1_ner@zh" not in needs
    stamp = tmp_path / "mini" / "multiconer" / "zh" / "s4_generator" / "_stage.json"
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({"lease": "s4_generator@zh", "memory": {"cuda_peak_mb": 20000}}))
    measured = measured_needs(tmp_path, "mini")
    assert measured["s4_generator@zh"] == measured["s4_generator"] == 20000 * 2
    assert stage_needs(ACLM, measured, {"zh": 2.0})["s4_generator@zh"] == measured["s4_generator@zh"]


@pytest.mark.slow
def test_padded_lengths_by_language_with_the_real_vocabulary(real_vocab, shared_data):
    from aclm.experiments.packing import length_ratios

    ratios = length_ratios(["multiconer/zh", "multiconer/ko", "multiconer/de"], str(real_vocab / "mbart-large-50"))
    assert ratios["zh"] > 1.8 and 1.0 < ratios["ko"] < ratios["zh"] and 0.8 < ratios["de"] < 1.2
