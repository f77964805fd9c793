"""A run stopped by Ctrl-C is never taken as finished: S1, S4 and S7, each stopped mid-training.

flair's trainer swallows ``KeyboardInterrupt`` and returns as if training had
ended, so the project's own handler raises an exception flair does not catch
(:class:`aclm.base.runtime.Interrupted`); these tests send a real SIGINT to a
real run and check that nothing of the interrupted stage is stamped, that the
exit status says so, and that a rerun trains that stage again.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest


from aclm.base.config import load_config
from aclm.base.paths import PROJECT_ROOT
from aclm.stages.layout import RESULT, RunLayout
from aclm.run.naming import run_config
from aclm.engine import STAMP
from aclm.steps.ner import EarlyStopping, TrainingInterrupted, schedule_plugins, stop_reason

pytestmark = pytest.mark.slow


#: tiny's sample, with S1 short (60 gold sentences) and S7 long enough to stop mid-way (its ~6x more data)
SETTING = ["profile=tiny", "ner.epochs=10", "generator.epochs=3", "generation.rounds=2"]
EPOCH_DONE = r"train tagger:\s+\d+%\S*\s*\| *[1-9]\d*/"


class Run:
    """A run script in its own process, its output watched, stopped with a real SIGINT."""

    def __init__(self, *args: str) -> None:
        # SIGINT back to its default: a child of a background job inherits it ignored
        self.proc = subprocess.Popen([sys.executable, *args], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.output = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(4096):
            self.output.extend(chunk)

    @property
    def text(self) -> str:
        return bytes(self.output).decode(errors="replace")

    def wait_for(self, *patterns: str, timeout: float = 600) -> None:
        """Until every pattern has matched, in order, in the output (the process still running)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            at = 0
            for pattern in patterns:
                match = re.compile(pattern).search(self.text, at)
                if match is None:
                    break
                at = match.end()
            else:
                return
            assert self.proc.poll() is None, f"the run ended before {patterns}:\n{self.text[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"no {patterns} within {timeout} s:\n{self.text[-3000:]}")

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=300)
        self.reader.join(timeout=10)
        return code


def scratch_dirs(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_models) -> Path:
    return tmp_path_factory.mktemp("interrupt")


def layout_of(run_dir: Path, method: str) -> RunLayout:
    return RunLayout.of(run_config([*SETTING, f"run_dir={run_dir}", f"method={method}"]))


def test_ctrl_c_in_s1_training_leaves_no_stamp_and_the_rerun_trains_again(run_dir):
    args = ["scripts/ner.py", *SETTING, "ner.epochs=300", f"run_dir={run_dir / 'long'}"]
    run = Run(*args)
    run.wait_for(r"s1_ner: running", EPOCH_DONE)
    assert run.interrupt() == 130, run.text[-2000:]
    s1 = RunLayout.of(run_config([*SETTING, "ner.epochs=300", f"run_dir={run_dir / 'long'}"])).s1
    assert not s1.exists() and not scratch_dirs(run_dir / "long"), run.text[-2000:]
    assert "interrupted (SIGINT)" in run.text and "stopped after" not in run.text   # not flair's graceful path

    again = Run(*args)
    again.wait_for(r"data: up to date", r"s1_ner: running", EPOCH_DONE)
    assert again.interrupt() == 130
    assert not s1.exists()


def test_ctrl_c_in_s4_training_leaves_no_stamp_and_the_rerun_trains_again(run_dir):
    args = ["scripts/run_method.py", *SETTING, "method=aclm", f"run_dir={run_dir}"]
    run = Run(*args)
    run.wait_for(r"s4_generator: running", r"fine-tune generator:.*?\| *[1-9]\d*/\d+ \[")   # steps under way
    assert run.interrupt() == 130, run.text[-2000:]
    here = layout_of(run_dir, "aclm")
    assert (here.stage("s3_templates") / STAMP).exists()
    assert not here.stage("s4_generator").exists() and not scratch_dirs(run_dir)

    again = Run(*args)
    again.wait_for(r"s1_ner: up to date", r"s3_templates: up to date", r"s4_generator: running")
    assert again.interrupt() == 130
    assert not here.stage("s4_generator").exists()


def test_ctrl_c_in_s7_training_leaves_no_result_and_the_rerun_trains_again(run_dir):
    args = ["scripts/run_method.py", *SETTING, "method=lwtr", f"run_dir={run_dir}"]
    run = Run(*args)
    run.wait_for(r"s7_ner: running", EPOCH_DONE)
    assert run.interrupt() == 130, run.text[-2000:]
    here = layout_of(run_dir, "lwtr")
    assert (here.stage("s6_postprocess") / STAMP).exists()
    assert not here.stage("s7_ner").exists() and not (here.stage("s7_eval") / RESULT).exists()
    assert not scratch_dirs(run_dir)

    again = Run(*args)
    again.wait_for(r"s6_postprocess: up to date", r"s7_ner: running", EPOCH_DONE)
    assert again.interrupt() == 130
    assert not here.stage("s7_ner").exists()


def test_stop_reason_names_how_training_ended_and_refuses_an_interruption(tmp_path):
    cfg = load_config(["profile=paper", "ner.epochs=10"]).ner
    assert stop_reason(cfg, 10, []) == "all epochs"
    with pytest.raises(TrainingInterrupted, match="3 of 10 epochs"):
        stop_reason(cfg, 3, [])
    patience = EarlyStopping(2)
    assert pytest.raises(TrainingInterrupted, stop_reason, cfg, 3, [patience])
    patience.stopped = True
    assert stop_reason(cfg, 3, [patience]) == "patience"
    annealing = schedule_plugins(cfg, tmp_path)[0]
    annealing.current_learning_rate = [cfg.min_lr * 2]
    assert pytest.raises(TrainingInterrupted, stop_reason, cfg, 3, [annealing])
    annealing.current_learning_rate = [cfg.min_lr / 2]
    assert stop_reason(cfg, 3, [annealing]) == "annealing floor"


def test_a_finished_stage_records_its_epochs_and_why_it_stopped(fast, tmp_path):
    from aclm.base.io import read_json
    from aclm.run.chain import run_method

    cfg = fast(tmp_path)
    done = run_method(cfg)
    stamp = read_json(done["s1_ner"] / STAMP)
    training = stamp["facts"]["training"]
    assert {k: training[k] for k in ("epochs_trained", "max_epochs", "stop_reason")} == {
        "epochs_trained": 2, "max_epochs": 2, "stop_reason": "all epochs"}
    epochs = training["epoch_seconds"]                  # where each epoch's time went
    assert [e["epoch"] for e in epochs] == [1, 2] and all(e["train"] > 0 and e["dev"] > 0 for e in epochs)
    assert training["seconds"]["save"] == pytest.approx(sum(e["save"] for e in epochs), abs=0.01)
    assert sum(training["seconds"].values()) < stamp["seconds"]
    assert read_json(done["s1_eval"] / RESULT)["training"] == training
