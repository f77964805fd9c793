"""make gpu-check: its steps, its CPU dry mode end to end, the peaks it writes, and the offline node's bundle."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile

import pytest
import torch

from aclm.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow


SCRIPT = PROJECT_ROOT / "tools" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module                     # where its dataclasses look themselves up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


def test_a_step_over_its_time_is_stopped_and_says_so(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "STEP_LIMIT", 1)
    record = gpu_check.run_step("s", ["sleep", "30"], {"PATH": "/usr/bin:/bin"}, tmp_path)
    assert record["status"].startswith("cut off after 1 s") and record["seconds"] < 30
    assert gpu_check.run_step("t", ["false"], {"PATH": "/usr/bin:/bin"}, tmp_path)["status"] == "failed (exit 1)"


def test_steps_are_chosen_by_name_or_its_beginning_in_the_plans_order(gpu_check, tmp_path):
    plan = gpu_check.plan(gpu_check.dry_mode(), tmp_path, sys.executable, None)
    names = [name for name, _ in gpu_check.selected(plan, ["pack", "generation-batch-4", "environment"])]
    assert names == ["environment", "generation-batch-4", "generation-batch-4-entities", "pack-1", "pack-2",
                     "pack-aclm-1", "pack-aclm-2"]
    assert gpu_check.selected(plan, None) == plan
    with pytest.raises(SystemExit, match="no step is named pipline"):
        gpu_check.selected(plan, ["pipline"])


def test_the_measured_peaks_replace_the_files_and_a_baselines_generation_takes_s4s(gpu_check, tmp_path):
    source, out = tmp_path / "peaks.json", tmp_path / "new.json"
    source.write_text(json.dumps({"process_factor": 1.25, "cuda_peak_mb": {"s1_ner": 1, "s1_eval": 2, "s4_generator": 3,
                                  "augment": 3, "s7_eval": 4, "s5_generation": 5}}))
    costs = {"stages": [{"stage": "s1_ner", "cuda_peak_mb": 10}, {"stage": "s4_generator", "cuda_peak_mb": 30},
                        {"stage": "s7_eval", "cuda_peak_mb": 40}, {"stage": "s5_generation"}, {"stage": "data"}]}
    gpu_check.write_peaks(costs, source, out, "a test")
    assert json.loads(out.read_text()) == {"process_factor": 1.25, "measured": "a test", "cuda_peak_mb": {
        "s1_ner": 10, "s1_eval": 40, "s4_generator": 30, "augment": 30, "s7_eval": 40, "s5_generation": 5}}


def run_check(*args: str, bare: bool = False) -> subprocess.CompletedProcess:
    """The check as a user starts it; ``bare``: its own process without site-packages or PYTHONPATH (``-I -S``),
    as on an offline node where only its steps see the bundle."""
    flags = ["-I", "-S"] if bare else []
    return subprocess.run([sys.executable, *flags, str(SCRIPT), "run", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=3000)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_cuda_the_check_says_so_and_succeeds():
    done = run_check()
    assert done.returncode == 0 and "no CUDA device found" in done.stdout


def test_dry_mode_runs_every_step_on_the_cpu_and_a_rerun_resumes_the_pipeline(tiny_models, tmp_path):
    first = run_check("--dry-run", "--state", str(tmp_path))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    results = json.loads((tmp_path / "gpu-check.json").read_text())
    assert [r["step"] for r in results["steps"]] == [
        "environment", "cuda-tests", "models", "generation-batch-2", "generation-batch-4", "generation-batch-4-entities",
        "llm-batch-2", "pipeline", "pipeline-costs", "dev-scoring", "tagger-profile", "tagger-subtokens", "benchmark", "pack-1",
        "pack-2", "pack-aclm-1", "pack-aclm-2"]
    assert all(r["status"] == "done" for r in results["steps"])
    figures = results["figures"]
    assert figures["generation-batch-4-entities"]["parse_and_keep_entities"] == 1.0
    llm = figures["llm-batch-2"]                                    # the LLM method's writing, timed
    assert llm["screening"]["generated"] == llm["prompts"] == 4 and llm["responses_per_s"] > 0
    summary = (tmp_path / "gpu-check.md").read_text()
    assert summary.startswith("## DRY RUN on the CPU") and "say nothing about a GPU" in summary
    assert "CUDA tests (`pytest -m cuda`): 7 passed, 0 failed, 0 skipped." in summary   # their code, on the CPU
    assert "min if S7 trains on gold alone (as S1)" in summary and "min if on gold + R x gold" in summary
    assert "| s7_ner |" in summary and "| 4 | entities |" in summary and "| 2 | off |" in summary
    assert "Table 1 (840 runs), one run at a time" in summary and "the other methods as ACLM runs " in summary
    assert "An LLM writing the data" in summary and "| 2 | 4 |" in summary
    assert "| later, mean |" in summary and "| batched |" in summary and "ours faster" in summary
    scoring = figures["dev-scoring"]["points"]
    assert [p["batch_size"] for p in scoring] == [8, 32] and all(p["same_spans_as_first"] for p in scoring)
    profile = figures["tagger-profile"]
    assert profile["training"]["epochs_trained"] == 3 and profile["by_own_time"][0]["own_s"] > 0
    subtokens = figures["tagger-subtokens"]
    assert subtokens["same_dev_scores"] and len(subtokens["runs"]["flair"]["dev"]) == 5
    shared = figures["pack-aclm-2"]                                 # two ACLM runs leasing from one ledger
    assert shared["method"] == "aclm" and len(shared["s1"]) == 2 and "N ACLM runs at once" in summary
    assert shared["ledger"]["capacity_mb"] < 2 * shared["ledger"]["needs_mb"]["s4_generator"]   # one S4 at a time
    ledger = json.loads((tmp_path / "runs" / "pack-aclm-2" / "gpu.json").read_text())
    assert ledger["queue"] == [] and not any(h["stage"] for h in ledger["held"].values())
    peaks = json.loads((tmp_path / "gpu_peaks.json").read_text())       # written here, not over the committed file
    assert peaks["measured"].startswith("the GPU check") and set(peaks["cuda_peak_mb"]) == set(
        json.loads((PROJECT_ROOT / "configs" / "gpu_peaks.json").read_text())["cuda_peak_mb"])
    again = run_check("--dry-run", "--state", str(tmp_path), "--steps", "pipeline", bare=True)   # stdlib only
    assert again.returncode == 0 and "2 of 2 steps done" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    for step in ("pipeline", "pipeline-costs"):                      # every stage from the stage cache
        assert ": running" not in (tmp_path / "logs" / f"{step}.log").read_text()
    assert "| environment | done |" not in (tmp_path / "gpu-check.md").read_text()   # this call's steps...
    assert "| s7_ner |" in (tmp_path / "gpu-check.md").read_text()               # ...and every figure there


def test_the_bundle_holds_flair_the_pinned_transformers_and_the_data_within_64_mib(gpu_check, shared_data, tmp_path):
    probe = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(tmp_path),
                            "six==1.17.0"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(f"no package index reachable (pip download: {probe.stderr.strip()[-200:]})")
    out = tmp_path / "gpu-bundle"
    done = subprocess.run([sys.executable, str(SCRIPT), "bundle", "--out", str(out), "--python-version", "3.12"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "ACLM_DATA_DIR": str(shared_data)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) <= 64 * 2**20
    wheels = {w.name.split("-")[0].lower(): w.name for w in (out / "wheels").glob("*.whl")}
    assert wheels["transformers"].startswith("transformers-4.57.6-") and "flair" in wheels and "sentencepiece" in wheels
    assert not set(wheels) & {"torch", "numpy", "triton"} and not [p for p in (out / "wheels").iterdir()
                                                                   if p.suffix != ".whl"]   # sources built to wheels
    for name in gpu_check.BUNDLE_DATA:
        assert (out / "data" / "multiconer" / "en" / name).stat().st_size > 0
    assert (out / "vocabulary" / "sentencepiece.bpe.model").stat().st_size > 0
    for wheel in (out / "wheels").glob("*.whl"):                      # every one a cp312 or pure wheel
        assert "-cp312-" in wheel.name or "-abi3-" in wheel.name or wheel.name.endswith("-none-any.whl"), wheel.name
        assert zipfile.is_zipfile(wheel)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(out / "wheels"),
         "--no-deps", "--target", str(tmp_path / "site"), "--python-version", "3.12", "--implementation", "cp",
         "--only-binary=:all:", *[a for p in gpu_check.PLATFORMS for a in ("--platform", p)],
         "-r", str(out / "requirements.txt")], capture_output=True, text=True, timeout=1800)
    assert installed.returncode == 0, installed.stderr[-3000:]       # installable together for cp312, no index
    assert (tmp_path / "site" / "flair").is_dir()
