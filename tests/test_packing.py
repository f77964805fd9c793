"""JOBS=auto: how many runs one GPU holds, from measured CUDA peaks and the card's free memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.packing import PAPER_PEAK_MB, measured_peak, runs_per_gpu


def test_the_paper_size_peak_fits_three_runs_on_an_80_gb_card_and_gold_only_twelve():
    h100_free = 79.2 * 1024                                   # MB free on an idle H100 (the GPU check)
    assert runs_per_gpu(h100_free, PAPER_PEAK_MB, cpus=16) == 3      # 3 x 16.3 GB x 1.25 fits, 4 does not
    assert runs_per_gpu(h100_free, 5057, cpus=16) == 12              # S1's peak alone
    assert runs_per_gpu(h100_free, 5057, cpus=2) == 2                # one run per core at most
    assert runs_per_gpu(1000, PAPER_PEAK_MB, cpus=16) == 1           # never 0: one run always starts


def test_the_measured_peak_is_the_largest_any_stage_of_the_profile_recorded(tmp_path):
    assert measured_peak(tmp_path, "paper") is None
    for stage, peak in (("s1_ner", 5057), ("s4_generator", 16313), ("s6_postprocess", None)):
        folder = tmp_path / "paper" / "multiconer" / "en" / "gold100" / "seed1" / stage
        folder.mkdir(parents=True)
        (folder / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": peak}}))
    other = tmp_path / "mini" / "s1_ner"
    other.mkdir(parents=True)
    (other / "_stage.json").write_text(json.dumps({"memory": {"cuda_peak_mb": 90000}}))
    assert measured_peak(tmp_path, "paper") == 16313


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_a_gpu_jobs_says_one_at_a_time(tmp_path):
    done = subprocess.run([sys.executable, "scripts/grid.py", "jobs", "mini_table1", "profile=mini",
                           f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1"
    assert "no GPU visible" in done.stderr
