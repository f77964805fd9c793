"""JOBS=auto: how many runs one GPU holds, from measured CUDA peaks and the card's free memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.packing import PAPER_PEAKS_MB, measured_peaks, need_mb, runs_per_gpu

H100_FREE = 79.2 * 1024                                   # MB free on an idle H100 (the GPU check)
GOLD_ONLY = ("data", "s1_ner", "s1_eval")
ACLM = (*GOLD_ONLY, "s2_keywords", "s3_templates", "s4_generator", "s5_generation", "s6_postprocess", "s7_ner",
        "s7_eval")


def test_gold_only_packs_by_s1s_peak_and_aclm_by_s4s():
    assert need_mb(GOLD_ONLY, {}) == (5054, "s1_ner, at paper size (GPU check)")
    assert need_mb(ACLM, {})[0] == 16313
    assert runs_per_gpu(H100_FREE, need_mb(ACLM, {})[0], cpus=16) == 3       # 3 x 16.3 GB x 1.25 fits, 4 does not
    assert runs_per_gpu(H100_FREE, need_mb(GOLD_ONLY, {})[0], cpus=16) == 12
    assert runs_per_gpu(H100_FREE, 5054, cpus=2) == 2                          # one run per core at most
    assert runs_per_gpu(1000, 16313, cpus=16) == 1                             # never 0: one run always starts
    assert need_mb(("augment",), {})[0] == max(PAPER_PEAKS_MB.values())       # unmeasured: the largest


def test_a_stages_measured_peak_replaces_its_paper_size_one(tmp_path):
    assert measured_peaks(tmp_path, "mini") == {}
    for folder, peak in (("seed1/s1_ner", 900), ("seed2/s1_ner", 1100), ("seed1/aclm/s4_generator", 3000),
                         ("seed1/aclm/s6_postprocess", None)):
        stage = tmp_path / "mini" / "multiconer" / "en" / "gold100" / folder
        stage.mkdir(parents=True)
        (stage / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": peak}}))
    other = tmp_path / "paper" / "s1_ner"
    other.mkdir(parents=True)
    (other / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": 90000}}))
    measured = measured_peaks(tmp_path, "mini")
    assert measured == {"s1_ner": 1100, "s4_generator": 3000}
    assert need_mb(ACLM, measured) == (5871, "s5_generation, at paper size (GPU check)")   # S5 never ran here
    assert need_mb(GOLD_ONLY, measured) == (2978, "s1_eval, at paper size (GPU check)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_jobs_says_one_at_a_time(tmp_path):
    done = subprocess.run([sys.executable, "scripts/grid.py", "jobs", "mini_table1", "profile=mini",
                           f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1"
    assert "no GPU visible" in done.stderr
