"""Runs sharing a GPU lease its memory stage by stage (aclm/engine/memory.py), in real processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aclm.experiments import packing
from aclm.engine import memory
from aclm.engine.stages import run_stage

NEEDS = {"s4_generator": 8, "s1_ner": 5, "s2_keywords": 1, "huge": 50}
FORK = multiprocessing.get_context("fork")
DEADLINE_S = 30


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    memory.create(path, 10, NEEDS)
    monkeypatch.setenv(memory.LEDGER_ENV, str(path))
    monkeypatch.setattr(memory, "POLL_S", 0.05)                   # the forked runs inherit it
    return path


def until(condition, what: str) -> None:
    """Wait for ``condition``, polling the ledger the runs write; fail after ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {DEADLINE_S} s"
        time.sleep(0.01)


def holders(ledger: Path) -> dict[str, str]:
    """pid -> the stage it holds a lease for (a context left between stages is no lease)."""
    return {pid: h["stage"] for pid, h in json.loads(ledger.read_text())["held"].items() if h["stage"]}


def queued(ledger: Path) -> list[str]:
    return json.loads(ledger.read_text())["queue"]


def hold(stage: str, events, free) -> None:
    """A run's stage: lease, say when it got the memory, keep it until the test frees it, say when it did."""
    with memory.lease(stage):
        events.put((stage, "got", time.monotonic()))
        free.wait(DEADLINE_S)
        events.put((stage, "freed", time.monotonic()))


class Run:
    """``stage`` in a process of its own, returned once the ledger has it, holding its lease or queued."""

    def __init__(self, stage: str, ledger: Path, events) -> None:
        self.free = FORK.Event()
        self.process = FORK.Process(target=hold, args=(stage, events, self.free), daemon=True)
        self.process.start()
        self.pid = str(self.process.pid)
        until(lambda: self.pid in holders(ledger) or self.pid in queued(ledger), f"{stage} in the ledger")


def timeline(events, runs: list[Run]) -> dict:
    """Free every run, wait for them to end, and say when each stage got and freed its memory."""
    for run in runs:
        run.free.set()
    for run in runs:
        run.process.join(DEADLINE_S)
        assert run.process.exitcode == 0
    out = {}
    while not events.empty():
        stage, what, when = events.get()
        out[stage, what] = when
    return out


def test_a_stage_that_does_not_fit_waits_and_a_later_small_one_does_not_pass_it(ledger):
    events = FORK.Queue()
    s4 = Run("s4_generator", ledger, events)       # 8 of 10 MB
    s1 = Run("s1_ner", ledger, events)             # 5 more do not fit: waits for S4
    s2 = Run("s2_keywords", ledger, events)        # 1 more would fit, but S1 came first
    assert holders(ledger) == {s4.pid: "s4_generator"} and queued(ledger) == [s1.pid, s2.pid]
    t = timeline(events, [s4, s1, s2])
    assert t["s1_ner", "got"] >= t["s4_generator", "freed"]
    assert t["s2_keywords", "got"] >= t["s4_generator", "freed"]      # it fitted beside S4, but S1 was first
    state = json.loads(ledger.read_text())
    assert state["queue"] == [] and all(h["stage"] is None for h in state["held"].values())   # contexts only


def test_stages_that_fit_together_run_together(ledger):
    events = FORK.Queue()
    s1, s2 = Run("s1_ner", ledger, events), Run("s2_keywords", ledger, events)          # 5 + 1 of 10 MB
    # one reading of the ledger with both leases held; the times the runs report come after their ledger
    # writes, so under load S2's "got" can follow S1's "freed" although both held their leases together
    assert holders(ledger) == {s1.pid: "s1_ner", s2.pid: "s2_keywords"}
    timeline(events, [s1, s2])


def test_a_dead_runs_lease_is_dropped_and_a_need_larger_than_the_card_runs_alone(ledger):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = json.loads(ledger.read_text())
    state["held"][str(dead.pid)] = {"stage": "s4_generator", "mb": 10}        # killed while holding the card
    ledger.write_text(json.dumps(state))
    with memory.lease("huge"):                                              # 50 MB of 10: alone, so it runs
        held = json.loads(ledger.read_text())["held"]
    assert held == {str(os.getpid()): {"stage": "huge", "mb": 50}}
    assert json.loads(ledger.read_text())["held"][str(os.getpid())] == {"stage": None, "mb": memory.CONTEXT_MB}


def test_without_a_ledger_or_for_a_cpu_stage_nothing_is_leased(ledger, monkeypatch):
    with memory.lease("s3_templates"):
        assert json.loads(ledger.read_text())["held"] == {}
    monkeypatch.delenv(memory.LEDGER_ENV)
    with memory.lease("s4_generator"):
        pass
    assert json.loads(ledger.read_text())["held"] == {}


def test_a_stage_runs_holding_its_lease_and_its_waiting_is_not_its_time(ledger, tmp_path):
    seen, wait_s = {}, 0.6

    def build(scratch):
        seen.update(json.loads(ledger.read_text())["held"])
        return {}

    def free_s4_once_s1_waits():
        try:
            until(lambda: str(os.getpid()) in queued(ledger), "S1 queued")
            time.sleep(wait_s)                                  # how long S1 waits, not who goes first
        finally:
            s4.free.set()

    events = FORK.Queue()
    s4 = Run("s4_generator", ledger, events)                    # S1's 5 MB wait for it
    threading.Thread(target=free_s4_once_s1_waits, daemon=True).start()
    began = time.monotonic()
    assert run_stage("s1_ner", tmp_path / "s1_ner", {"k": 1}, [], build)
    assert time.monotonic() - began > wait_s
    assert json.loads((tmp_path / "s1_ner" / "_stage.json").read_text())["seconds"] < wait_s
    assert seen[str(os.getpid())] == {"stage": "s1_ner", "mb": 5}
    timeline(events, [s4])


def test_jobs_auto_counts_runs_by_their_tagger_and_writes_the_ledger(tmp_path, monkeypatch):
    peaks = tmp_path / "gpu_peaks.json"                       # made up: a new GPU check must not fail this test
    peaks.write_text(json.dumps({"reference_dataset": "multiconer/en", "process_factor": 1.25, "fixed_mb": {},
                                 "cuda_peak_mb": {"s1_ner": 4000, "s3_templates": 10, "s4_generator": 10000},
                                 "in_use_over_peak_mb": {"s4_generator": [20000, 10000]}}))
    monkeypatch.setattr(packing, "PEAKS_FILE", peaks)
    monkeypatch.setattr(packing, "free_gpu_memory_mb", lambda: 50_000)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    stages = ("s1_ner", "s3_templates", "s4_generator")
    assert packing.choose(stages, tmp_path, "paper").runs == 2                 # by what S4's process holds
    chosen = packing.choose(stages, tmp_path, "paper", tmp_path / "gpu.json")
    assert chosen.runs == 9 and "leases" in chosen.reason                     # by the tagger's 5,000 MB
    state = json.loads((tmp_path / "gpu.json").read_text())
    assert state["capacity_mb"] == round(50_000 * packing.HEADROOM)
    assert state["needs_mb"] == {"s1_ner": 5000, "s4_generator": 20000}       # S3 runs on the CPU: no lease
    monkeypatch.setattr(packing, "free_gpu_memory_mb", lambda: None)
    assert packing.choose(stages, tmp_path, "paper", tmp_path / "gpu.json").runs == 1
    assert not (tmp_path / "gpu.json").exists()                               # no GPU: no stale ledger



def test_a_stage_in_a_language_leases_that_languages_need_else_the_stages(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    memory.create(path, 100, {"s4_generator": 8, "s4_generator@zh": 14})
    monkeypatch.setenv(memory.LEDGER_ENV, str(path))
    for stage, mb in (("s4_generator@zh", 14), ("s4_generator@en", 8), ("s4_generator", 8)):
        with memory.lease(stage):
            assert json.loads(path.read_text())["held"][str(os.getpid())]["mb"] == mb


def test_a_block_shorter_than_one_sample_still_records_its_peak(monkeypatch):
    # the sampler thread never gets to run: the peak must come from the block's own start and end
    monkeypatch.setattr(memory.threading.Thread, "start", lambda self: None)
    monkeypatch.setattr(memory.threading.Thread, "join", lambda self: None)
    with memory.PeakMemory() as peak:
        pass
    assert peak.facts()["peak_rss_mb"] > 0


def test_a_stage_stamps_its_peak_read_after_the_block_ended(monkeypatch, tmp_path):
    # CUDA's peak is read when the block ends: a stamp written inside the block would never hold it
    ended, exit_block = [], memory.PeakMemory.__exit__
    monkeypatch.setattr(memory.PeakMemory, "__exit__", lambda self, *exc: ended.append(exit_block(self, *exc)))
    monkeypatch.setattr(memory.PeakMemory, "facts", lambda self: {"ended_first": bool(ended)})
    run_stage("probe", tmp_path / "probe", {}, [], lambda out: {})
    assert json.loads((tmp_path / "probe" / "_stage.json").read_text())["memory"]["ended_first"] is True
