"""make gpu-check: resumable steps, its CPU dry mode end to end, and the offline node's bundle."""

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


def check(gpu_check, state):
    return gpu_check.Check(gpu_check.dry_mode(), state, {"PATH": "/usr/bin:/bin"}, sys.executable)


def test_a_step_cut_off_runs_again_and_a_finished_one_is_skipped(gpu_check, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "STEP_LIMIT", 1)
    runner = check(gpu_check, tmp_path)
    assert gpu_check.run_step(gpu_check.Step("s", ["sleep", "30"]), runner)["status"].startswith("cut off after 1 s")
    quick = gpu_check.Step("s", ["true"], lambda: {"figure": 1})
    assert gpu_check.run_step(quick, runner)["result"] == {"figure": 1}
    assert gpu_check.run_step(quick, runner)["result"] == {"figure": 1}           # finished: skipped
    assert gpu_check.run_step(gpu_check.Step("s", ["true", "other settings"]), runner)["status"] == "done"
    assert (tmp_path / "logs" / "s.log").read_text().count("== ") == 3             # the skipped one started nothing
    made = tmp_path / "made"
    installs = gpu_check.Step("i", ["mkdir", "-p", str(made)], lasts=made.is_dir)
    assert gpu_check.run_step(installs, runner)["status"] == "done"
    made.rmdir()                                     # a fresh copy of the tree lost what the step made: it runs again
    assert gpu_check.run_step(installs, runner)["status"] == "done" and made.is_dir()
    assert (tmp_path / "logs" / "i.log").read_text().count("== ") == 2
    assert gpu_check.run_step(gpu_check.Step("late", ["true"]), runner, limit=0)["status"] == "not run (budget spent)"
    assert not (tmp_path / "steps" / "late.json").exists()


def test_steps_are_chosen_by_name_or_its_beginning_in_the_plans_order(gpu_check, tmp_path):
    plan = gpu_check.plan_steps(check(gpu_check, tmp_path), None)
    names = [s.name for s in gpu_check.selected(plan, ["pack", "generation-batch-4", "environment"])]
    assert names == ["environment", "generation-batch-4", "generation-batch-4-entities", "pack-1", "pack-2",
                     "pack-aclm-1", "pack-aclm-2"]
    assert gpu_check.selected(plan, None) == plan
    with pytest.raises(SystemExit, match="no step is named pipline"):
        gpu_check.selected(plan, ["pipline"])


def test_a_lease_that_ends_before_the_last_pipeline_step_still_shows_the_stages_measured(gpu_check):
    records = {"pipeline-s2-s4": {"result": {"stages": {"s4_generator": {"seconds": 132.6, "cuda_peak_mb": 16300}}}},
               "pipeline-s5": {"result": {"stages": {"s5_generation": {"seconds": 33.4}}}}}
    lines = gpu_check.pipeline_lines(records, gpu_check.dry_mode())
    assert "| s4_generator | 132.6 | 16300 |" in lines and "| s5_generation | 33.4 | - |" in lines
    assert gpu_check.pipeline_lines({}, gpu_check.dry_mode()) == []


def run_check(*args: str, bare: bool = False) -> subprocess.CompletedProcess:
    """The check as a user starts it; ``bare``: its own process without site-packages or PYTHONPATH (``-I -S``),
    as on an offline node where only its steps see the bundle."""
    flags = ["-I", "-S"] if bare else []
    return subprocess.run([sys.executable, *flags, str(SCRIPT), "run", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=3000)


def test_a_lease_split_over_two_calls_gives_one_summary_of_both(tiny_models, tmp_path):
    assert run_check("--dry-run", "--state", str(tmp_path), "--steps", "environment").returncode == 0
    second = run_check("--dry-run", "--state", str(tmp_path), "--steps", "models")
    assert second.returncode == 0 and "1 of 1 steps done" in second.stdout, second.stderr[-2000:]
    records = json.loads((tmp_path / "gpu-check.json").read_text())["steps"]
    assert list(records) == ["environment", "models"]        # the first call's step is in the second's summary
    summary = (tmp_path / "gpu-check.md").read_text()
    assert "| environment | done |" in summary and "### Generation batch size" not in summary   # no empty table
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert all(r["code"].startswith(head) for r in records.values())       # the code each step measured
    assert f"Code: {records['models']['code']}." in summary


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_without_cuda_the_check_says_so_and_succeeds():
    done = run_check()
    assert done.returncode == 0 and "no CUDA device found" in done.stdout


def test_dry_mode_runs_every_step_on_the_cpu_and_a_rerun_skips_them(tiny_models, tmp_path):
    first = run_check("--dry-run", "--state", str(tmp_path))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    records = json.loads((tmp_path / "gpu-check.json").read_text())["steps"]
    assert list(records) == ["environment", "cuda-tests", "models", "generation-batch-2", "generation-batch-4",
                             "generation-batch-4-entities", "pipeline-s0-s1", "dev-scoring", "tagger-profile",
                             "tagger-subtokens", "pipeline-s2-s4", "pipeline-s5", "pipeline-s6-s7", "benchmark",
                             "pack-1", "pack-2", "pack-aclm-1", "pack-aclm-2"]
    assert all(r["status"] == "done" for r in records.values())
    tests = records["cuda-tests"]["result"]
    assert tests["failed"] == 0 and tests["passed"] == 7                # the CUDA tests' code, run on the CPU
    assert records["generation-batch-4-entities"]["result"]["parse_and_keep_entities"] == 1.0
    summary = (tmp_path / "gpu-check.md").read_text()
    assert summary.startswith("## DRY RUN on the CPU") and "say nothing about a GPU" in summary
    assert "min here if S7 trains on gold alone (as S1)" in summary and "min if on gold + R x gold" in summary
    assert "| s7_ner |" in summary and "| 4 | entities |" in summary and "| 2 | off |" in summary
    assert "Table 1 (840 runs), one run at a time" in summary and "the other methods as ACLM runs " in summary
    epochs = records["pipeline-s0-s1"]["result"]["training"]["epoch_seconds"]       # the S1 epoch's split
    assert epochs and all(e["train"] > 0 and e["dev"] > 0 for e in epochs) and "| later, mean |" in summary
    scoring = records["dev-scoring"]["result"]["points"]
    assert [p["batch_size"] for p in scoring] == [8, 32] and all(p["same_spans_as_first"] for p in scoring)
    profile = records["tagger-profile"]["result"]
    assert profile["training"]["epochs_trained"] == 3 and profile["by_own_time"][0]["own_s"] > 0
    subtokens = records["tagger-subtokens"]["result"]
    assert subtokens["same_dev_scores"] and len(subtokens["runs"]["flair"]["dev"]) == 5 and "| batched |" in summary
    assert records["pipeline-s2-s4"]["result"]["stages"]["s4_generator"]["seconds"] > 0
    last = (tmp_path / "logs" / "pipeline-s6-s7.log").read_text()      # resumes the folders the other steps wrote
    assert "s6_postprocess: running" in last and "s1_ner: running" not in last and "s4_generator: running" not in last
    bench = records["benchmark"]["result"]
    assert bench["generation_released_s"] > 0 and bench["retrieval_15k_seconds"] > 0 and "ours faster" in summary
    shared = records["pack-aclm-2"]["result"]                       # two ACLM runs leasing from one ledger
    assert shared["method"] == "aclm" and len(shared["s1"]) == 2 and "N ACLM runs at once" in summary
    assert shared["ledger"]["capacity_mb"] < 2 * shared["ledger"]["needs_mb"]["s4_generator"]   # one S4 at a time
    ledger = json.loads((tmp_path / "runs" / "pack-aclm-2" / "gpu.json").read_text())
    assert ledger["queue"] == [] and not any(h["stage"] for h in ledger["held"].values())
    again = run_check("--dry-run", "--state", str(tmp_path), bare=True)     # writes the results again, stdlib only
    assert again.returncode == 0 and again.stdout.count("done earlier") == len(records), again.stderr[-2000:]


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
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bytes"] <= 64 * 2**20
    wheels = {gpu_check.wheel_pin(w) for w in (out / "wheels").glob("*.whl")}
    names = {name for name, _ in wheels}
    assert ("transformers", "4.57.6") in wheels and "flair" in names and "sentencepiece" in names
    assert not names & {"torch", "numpy", "triton"}
    for name in gpu_check.BUNDLE_DATA:
        assert (out / "data" / "multiconer" / "en" / name).stat().st_size > 0
    for wheel in (out / "wheels").glob("*.whl"):                      # every one a cp312 or pure wheel
        assert "-cp312-" in wheel.name or "-abi3-" in wheel.name or wheel.name.endswith("-none-any.whl"), wheel.name
        assert zipfile.is_zipfile(wheel)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", str(tmp_path / "site"),
         "--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:",
         *[a for p in gpu_check.PLATFORMS for a in ("--platform", p)], *map(str, (out / "wheels").glob("*.whl"))],
        capture_output=True, text=True, timeout=1800)
    assert installed.returncode == 0, installed.stderr[-3000:]       # installable together for cp312
    assert (tmp_path / "site" / "flair").is_dir()
