"""`make reproduce-table1` on a one-setting slice, end to end (skipped without ../shared/data)."""

from __future__ import annotations

import os
import subprocess

import pytest

from aclm.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow


def make(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)


def test_table1_slice_runs_prints_and_resumes(shared_data, tiny_models, tmp_path):
    env = {**os.environ, "ACLM_DATA_DIR": str(shared_data), "OMP_NUM_THREADS": "1"}
    args = ["reproduce-table1", "PROFILE=smoke", "LANGS=en", "SIZES=100", "SEEDS=1",
            "METHODS=gold_only,lwtr", f"RUNS={tmp_path / 'runs'}", f"RESULTS={tmp_path / 'results'}"]
    # a run made first as a new user would, outside the grid (no cross-lingual test sets), keeping its models
    single = make("run", "METHOD=lwtr", "DATASET=multiconer/en", "GOLD=100", "SEED=1", "PROFILE=smoke",
                  f"ARGS=run_dir={tmp_path / 'runs'} storage.keep_models=true", env=env)
    assert single.returncode == 0, single.stderr[-3000:]
    lwtr_dir = tmp_path / "runs" / "smoke" / "multiconer" / "en" / "gold100" / "seed1" / "lwtr"
    trained = (lwtr_dir / "s7_ner" / "_stage.json").read_text()
    first = make(*args, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # the grid's cell wants the cross-lingual test sets: it re-scored the run, and only that
    assert (lwtr_dir / "s7_ner" / "_stage.json").read_text() == trained
    assert "multiconer/hi" in (lwtr_dir / "s7_eval" / "result.json").read_text()
    assert not (lwtr_dir / "s7_ner" / "best-model.pt").exists()          # scored, so pruned (the default)
    assert "has no test." not in first.stdout and "stale" not in first.stdout
    table = first.stdout
    assert "(29.36" in table and "(48.60" in table        # the paper's Gold-only and LwTR at 100, en
    assert "LwTR" in table
    assert list((tmp_path / "results" / "smoke").glob("table1.*"))

    results = sorted((tmp_path / "runs").rglob("result.json"))
    assert len(results) == 2
    stamps = {p: p.stat().st_mtime_ns for p in results}
    again = make(*args, env=env)                            # nothing left to do
    assert again.returncode == 0
    assert {p: p.stat().st_mtime_ns for p in results} == stamps

    pruned = make("prune-table1", *args[1:], env=env)        # the finished setting's S1 weights, on request
    assert pruned.returncode == 0 and "pruned the S1 weights of 1 finished settings" in pruned.stdout
    assert not list((tmp_path / "runs").rglob("*.pt"))
    assert make(*args, env=env).returncode == 0             # and still nothing to do
    assert {p: p.stat().st_mtime_ns for p in results} == stamps

    lwtr = next(p for p in results if "/lwtr/" in str(p))
    lwtr.unlink()                                           # as if killed before it finished
    resumed = make(*args, "JOBS=auto", env=env)            # no GPU here: one run at a time, no ledger
    assert resumed.returncode == 0 and lwtr.exists(), resumed.stderr[-3000:]
    assert "no GPU visible" in resumed.stderr and not list((tmp_path / "runs").rglob("*.gpu.json"))
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != lwtr)
