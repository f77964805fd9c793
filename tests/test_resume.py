"""A killed run, resumed, ends with the same bytes as a run that was never interrupted.

Every stage builds its directory in a scratch folder (``.<stage>.<random>.tmp``
beside it, see ``aclm.base.io.atomic_dir``) and renames it into place when done, so a
run killed at any point leaves only whole stages behind, and the next run
redoes the killed stage from scratch.  The test runs ACLM on the bundled sample
with the tiny models twice: once straight through, and once killed (SIGKILL)
in the middle of S1, S4, S5 and S7 and resumed after each kill.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aclm.base.io import read_json
from aclm.base.paths import PROJECT_ROOT
from aclm.stages.layout import RunLayout
from aclm.run.naming import run_config
from aclm.engine import STAMP
from conftest import FAST

pytestmark = pytest.mark.slow


KILLED_IN = ("s1_ner", "s4_generator", "s5_generation", "s7_ner")
COMPARED = ["s5_generation/generations.jsonl", "s6_postprocess/gold+aug.conll", "s7_eval/predictions/*.conll"]
STAGE_TIMEOUT = 900      # seconds to wait for a stage's scratch folder before giving up
RUN_TIMEOUT = 1800       # seconds for a whole run
KILL_AT = 0.5            # how far into a stage to kill it: a share of the uninterrupted run's time for it


def overrides(run_dir: Path) -> list[str]:
    return ["method=aclm", *FAST, f"run_dir={run_dir}"]


def start(run_dir: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "scripts/run_method.py", *overrides(run_dir)], cwd=PROJECT_ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def run_to_end(run_dir: Path, log: Path) -> None:
    proc = start(run_dir, log)
    try:
        code = proc.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"run in {run_dir} took over {RUN_TIMEOUT} s:\n{tail(log)}")
    assert code == 0, f"run in {run_dir} failed (exit {code}):\n{tail(log)}"


def stage_dir(cfg, stage: str) -> Path:
    return RunLayout.of(cfg).stage(stage)


def scratch_dirs(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.*.tmp")) if out.parent.exists() else []


def kill_during(cfg, stage: str, delay: float, log: Path) -> bool:
    """Start the run and SIGKILL it ``delay`` seconds after ``stage`` starts building.

    Returns whether it died inside the stage (False: the stage was already done).
    """
    out = stage_dir(cfg, stage)
    before = set(scratch_dirs(out))          # left behind by earlier kills
    proc = start(Path(cfg.run_dir), log)
    try:
        deadline = time.monotonic() + STAGE_TIMEOUT
        while not set(scratch_dirs(out)) - before:
            if (out / STAMP).exists():          # started and finished between two looks
                break
            if proc.poll() is not None:
                pytest.fail(f"the run ended (exit {proc.returncode}) before {stage} started:\n{tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{stage} did not start within {STAGE_TIMEOUT} s (no {out.parent}/.{out.name}.*.tmp)")
            time.sleep(0.02)
        else:
            time.sleep(delay)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if (out / STAMP).exists():
        return False
    assert proc.returncode == -signal.SIGKILL, f"the run ended (exit {proc.returncode}) during {stage}:\n{tail(log)}"
    assert set(scratch_dirs(out)) - before, f"no scratch folder of {stage} left by the kill"
    return True


def kill_inside(cfg, stage: str, delay: float, log: Path) -> None:
    """Kill the run inside ``stage``; when the stage beats the delay, delete its output and try sooner."""
    for attempt in (delay, delay / 4, 0.0):
        if kill_during(cfg, stage, attempt, log):
            return
        shutil.rmtree(stage_dir(cfg, stage))    # the next run redoes it (and what follows it)
    pytest.fail(f"could not kill the run inside {stage}: it finished before each kill")


def compared_files(method_dir: Path) -> dict[str, bytes]:
    files = {str(p.relative_to(method_dir)): p.read_bytes() for pattern in COMPARED for p in method_dir.glob(pattern)}
    for pattern in COMPARED:
        assert any(Path(name).match(pattern) for name in files), f"nothing matches {pattern} in {method_dir}"
    return files


def test_killed_and_resumed_run_matches_an_uninterrupted_one(tmp_path, tiny_models):
    log = tmp_path / "runs.log"
    reference = run_config(overrides(tmp_path / "reference"))
    run_to_end(tmp_path / "reference", log)
    seconds = {stage: read_json(stage_dir(reference, stage) / STAMP)["seconds"] for stage in KILLED_IN}

    resumed = run_config(overrides(tmp_path / "resumed"))
    for stage in KILLED_IN:
        kill_inside(resumed, stage, KILL_AT * seconds[stage], log)
    run_to_end(tmp_path / "resumed", log)

    expected = compared_files(RunLayout.of(reference).method_dir)
    got = compared_files(RunLayout.of(resumed).method_dir)
    assert sorted(got) == sorted(expected)
    differing = [name for name in expected if got[name] != expected[name]]
    assert not differing, f"resumed run differs from the uninterrupted one in {differing}"
