"""Runs sharing a GPU lease its memory stage by stage (aclm/engine/memory.py), in real processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from aclm.experiments import packing
from aclm.engine import memory
from aclm.engine.stages import run_stage

NEEDS = {"s4_generator": 8, "s1_ner": 5, "s2_keywords": 1, "huge": 50}


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    path = tmp_path / "gpu.json"
    memory.create(path, 10, NEEDS)
    monkeypatch.setenv(memory.LEDGER_ENV, str(path))
    monkeypatch.setattr(memory, "POLL_S", 0.05)
    return path


def hold(stage: str, seconds: float, events, started) -> None:
    """A run's stage: lease, say when it got the memory and when it gives it back."""
    memory.POLL_S = 0.05
    started.set()
    with memory.lease(stage):
        events.put((stage, "got", time.monotonic()))
        time.sleep(seconds)
        events.put((stage, "freed", time.monotonic()))


def start(stage: str, seconds: float, events) -> multiprocessing.Process:
    started = multiprocessing.Event()
    process = multiprocessing.get_context("fork").Process(target=hold, args=(stage, seconds, events, started))
    process.start()
    started.wait(10)
    time.sleep(0.3)                                # in the queue before the next one starts
    return process


def timeline(events, processes) -> dict:
    for p in processes:
        p.join(30)
        assert p.exitcode == 0
    out = {}
    while not events.empty():
        stage, what, when = events.get()
        out[stage, what] = when
    return out


def test_a_stage_that_does_not_fit_waits_and_a_later_small_one_does_not_pass_it(ledger):
    events = multiprocessing.get_context("fork").Queue()
    runs = [start("s4_generator", 1.0, events),   # 8 of 10 MB
            start("s1_ner", 0.2, events),         # 5 more do not fit: waits for S4
            start("s2_keywords", 0.2, events)]    # 1 more would fit, but S1 came first
    t = timeline(events, runs)
    assert t["s1_ner", "got"] >= t["s4_generator", "freed"]
    assert t["s2_keywords", "got"] >= t["s4_generator", "freed"]      # it fitted beside S4, but S1 was first
    state = json.loads(ledger.read_text())
    assert state["queue"] == [] and all(h["stage"] is None for h in state["held"].values())   # contexts only


def test_stages_that_fit_together_run_together(ledger):
    events = multiprocessing.get_context("fork").Queue()
    runs = [start("s1_ner", 1.0, events), start("s2_keywords", 0.2, events)]          # 5 + 1 of 10 MB
    t = timeline(events, runs)
    assert t["s2_keywords", "got"] < t["s1_ner", "freed"]


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
    seen = {}

    def build(scratch):
        seen.update(json.loads(ledger.read_text())["held"])
        return {}

    events = multiprocessing.get_context("fork").Queue()
    other = start("s4_generator", 1.0, events)                  # S1's 5 MB wait for it
    began = time.monotonic()
    assert run_stage("s1_ner", tmp_path / "s1_ner", {"k": 1}, [], build)
    assert time.monotonic() - began > 0.6
    assert json.loads((tmp_path / "s1_ner" / "_stage.json").read_text())["seconds"] < 0.5
    assert seen[str(os.getpid())] == {"stage": "s1_ner", "mb": 5}
    timeline(events, [other])


def test_jobs_auto_counts_runs_by_their_tagger_and_writes_the_ledger(tmp_path, monkeypatch):
    monkeypatch.setattr(packing, "free_gpu_memory_mb", lambda: 79.2 * 1024)   # an idle H100
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    stages = ("data", "s1_ner", "s1_eval", "s2_keywords", "s3_templates", "s4_generator", "s5_generation",
              "s6_postprocess", "s7_ner", "s7_eval")
    assert packing.choose(stages, tmp_path, "paper").runs == 2                 # by what S4's process holds
    chosen = packing.choose(stages, tmp_path, "paper", tmp_path / "gpu.json")
    assert chosen.runs == 12 and "leases" in chosen.reason                    # by the tagger's
    state = json.loads((tmp_path / "gpu.json").read_text())
    assert state["capacity_mb"] == round(79.2 * 1024 * packing.HEADROOM)
    assert state["needs_mb"]["s4_generator"] == 29067 and "s3_templates" not in state["needs_mb"]
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
