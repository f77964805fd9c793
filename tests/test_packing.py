"""JOBS=auto: how many runs one GPU holds, from measured CUDA peaks and the card's free memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.packing import measured_needs, need_mb, runs_per_gpu, stage_needs
from aclm.engine.memory import CONTEXT_MB

H100_FREE = 79.2 * 1024                                   # MB free on an idle H100 (the GPU check)
GOLD_ONLY = ("data", "s1_ner", "s1_eval")
ACLM = (*GOLD_ONLY, "s2_keywords", "s3_templates", "s4_generator", "s5_generation", "s6_postprocess", "s7_ner",
        "s7_eval")


def test_gold_only_packs_by_what_s1s_process_holds_and_aclm_by_s4s():
    assert need_mb(GOLD_ONLY, {}) == (6318, "s1_ner, at paper size (GPU check)")      # 5,054 MB peak x 1.25
    assert need_mb(ACLM, {})[0] == 29067                    # S4's process as nvidia-smi saw it, not 16,313 x 1.25
    assert runs_per_gpu(H100_FREE, need_mb(ACLM, {})[0], cpus=16) == 2       # 2 x 29 GB fit, 3 do not
    assert runs_per_gpu(H100_FREE, need_mb(GOLD_ONLY, {})[0], cpus=16) == 12
    assert runs_per_gpu(H100_FREE, 6318, cpus=2) == 2                          # one run per core at most
    assert runs_per_gpu(1000, 29067, cpus=16) == 1                             # never 0: one run always starts
    assert need_mb(("augment",), {})[0] == 29067                               # MulDA fine-tunes the same mBART-50
    assert need_mb(("unheard_of",), {})[0] == 29067                            # unmeasured: the largest


def test_an_80_gb_cards_ledger_lets_two_s4s_run_at_once_not_three():
    """Four runs' S4s at once held 124,916 MB on one H200: at 1.25 x their 16.3 GB peak the ledger would have let
    three share an 80 GB card, about 90 GB."""
    capacity, needs = H100_FREE * 0.95, stage_needs(ACLM, {})
    assert 2 * needs["s4_generator"] <= capacity < 3 * needs["s4_generator"]
    assert "s6_postprocess" not in needs and "data" not in needs                # CPU stages lease nothing


def test_a_stages_measured_need_replaces_its_paper_size_one(tmp_path):
    assert measured_needs(tmp_path, "mini") == {}
    for folder, memory in (("seed1/s1_ner", {"cuda_peak_mb": 900}), ("seed2/s1_ner", {"cuda_peak_mb": 1100}),
                           ("seed1/aclm/s4_generator", {"cuda_peak_mb": 3000}),
                           ("seed2/aclm/s2_keywords", {"cuda_peak_mb": 1000, "cuda_reserved_mb": 2000}),
                           ("seed1/aclm/s6_postprocess", {"cuda_peak_mb": None})):
        stage = tmp_path / "mini" / "multiconer" / "en" / "gold100" / folder
        stage.mkdir(parents=True)
        (stage / "_stage.json").write_text(json.dumps({"memory": memory}))
    other = tmp_path / "paper" / "s1_ner"
    other.mkdir(parents=True)
    (other / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": 90000}}))
    measured = measured_needs(tmp_path, "mini")
    assert measured == {"s1_ner": 1375, "s4_generator": round(3000 * 29067 / 16313),
                        "s2_keywords": 2000 + CONTEXT_MB}          # the allocator's reserve where larger
    assert need_mb(ACLM, measured) == (7339, "s5_generation, at paper size (GPU check)")   # S5 never ran here
    assert need_mb(GOLD_ONLY, measured) == (3722, "s1_eval, at paper size (GPU check)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_jobs_says_one_at_a_time(tmp_path):
    done = subprocess.run([sys.executable, "scripts/grid.py", "jobs", "mini_table1", "profile=mini",
                           f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1"
    assert "no GPU visible" in done.stderr


def test_s4_and_s5_need_more_in_a_language_whose_batches_pad_longer(tmp_path):
    from aclm.experiments.packing import language_need, paper_need

    assert language_need("s4_generator", 1.0) == paper_need("s4_generator") == 29067
    zh = language_need("s4_generator", 2.0)              # weights and Adam's moments stay, the activations double
    assert 36_000 < zh < 43_000                          # the range the zh targets' lengths suggested (issue 46)
    needs = stage_needs(ACLM, {}, {"zh": 2.0, "en": 1.0})
    assert needs["s4_generator@zh"] == zh and needs["s4_generator@en"] == 29067
    assert needs["s5_generation@zh"] > needs["s5_generation"] and "s1_ner@zh" not in needs
    stamp = tmp_path / "mini" / "multiconer" / "zh" / "s4_generator" / "_stage.json"
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({"lease": "s4_generator@zh", "memory": {"cuda_peak_mb": 20000}}))
    measured = measured_needs(tmp_path, "mini")
    assert measured["s4_generator@zh"] == measured["s4_generator"] == round(20000 * 29067 / 16313)
    assert stage_needs(ACLM, measured, {"zh": 2.0})["s4_generator@zh"] == measured["s4_generator@zh"]


def test_padded_lengths_by_language_with_the_real_vocabulary(real_vocab, shared_data):
    from aclm.experiments.packing import length_ratios

    ratios = length_ratios(["multiconer/zh", "multiconer/ko", "multiconer/de"], str(real_vocab / "mbart-large-50"))
    assert ratios["zh"] > 1.8 and 1.0 < ratios["ko"] < ratios["zh"] and 0.8 < ratios["de"] < 1.2
