"""One writer per run folder, no lost signal, no half-written stage, no result that is not what it says.

Two runs of one folder: the second fails at once naming the first (or waits
with ``--wait``); runs with other overrides write other folders.  SIGINT and
SIGTERM, sent at any moment of a stage, stop the run with 130 / 143 and leave
no stamp of what they interrupted.  Orphan scratch folders of killed runs go,
stage folders get the user's permissions, a full disk says so, and a method
whose S6 kept nothing does not pass for an augmented run.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from aclm.base.augmentation import NoAugmentation
from aclm.base.io import read_json, write_json
from aclm.base.paths import PROJECT_ROOT
from aclm.base.signals import Interrupted, check_interrupted, forget_signals, handle_signals
import aclm.engine.stages as stages
from aclm.stages import layout
from aclm.run.chain import run_method
from aclm.stages.layout import RunLayout
from aclm.engine import STAMP
from aclm.engine.stages import NotKept as NoSpace
from aclm.engine.stages import run_stage

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def start(*words: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "scripts/run_method.py", *words], cwd=PROJECT_ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


# --------------------------------------------------------------------------- one writer

@pytest.mark.slow
def test_a_second_run_of_the_same_folder_fails_naming_the_first_and_waits_with_wait(tiny_models, tmp_path):
    words = ["method=gold_only", "profile=tiny", "ner.epochs=100", f"run_dir={tmp_path}"]
    first = start(*words)
    root = tmp_path / "tiny" / "sample" / "en" / "goldfull" / "seed1@ner.epochs=100"
    wait_for(root / layout.DATA / STAMP, first)
    time.sleep(2)
    second = subprocess.run([sys.executable, "scripts/run_method.py", *words], cwd=PROJECT_ROOT, env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 1
    error = second.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and f"PID {first.pid} on {socket.gethostname()}" in error, error
    log = tmp_path / "waiting.log"
    with open(log, "w") as err:
        waiting = subprocess.Popen([sys.executable, "scripts/run_method.py", *words, "--wait"], cwd=PROJECT_ROOT,
                                   env=ENV, stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.monotonic() + 300
    while "waiting for" not in log.read_text() and time.monotonic() < deadline:
        assert first.poll() is None, "the first run ended before the second waited: make it longer"
        time.sleep(0.2)
    assert f"another run writes it (PID {first.pid}" in log.read_text()
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err[-2000:]
    later_out, _ = waiting.communicate(timeout=900)
    assert waiting.returncode == 0 and "s1_ner: up to date" in log.read_text()
    assert later_out.splitlines()[-1] == out.splitlines()[-1]          # the same result, trained once


@pytest.mark.slow
def test_runs_with_other_overrides_write_other_folders_and_print_their_own_result(tiny_models, tmp_path):
    runs = [start("method=gold_only", "profile=tiny", f"ner.epochs={n}", f"run_dir={tmp_path}") for n in (1, 3)]
    printed = []
    for proc in runs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-2000:]
        printed.append(re.search(r"F1 ([\d.]+).*\[(.*result\.json)\]", out.splitlines()[-1]).groups())
    (f1_a, path_a), (f1_b, path_b) = printed
    assert path_a != path_b and "seed1@ner.epochs=1" in path_a and "seed1@ner.epochs=3" in path_b
    for f1, path in printed:
        assert f"{read_json(path)['f1']:.2f}" == f1


def test_a_killed_runs_scratch_and_lock_record_are_cleared_by_the_next_run(fast, tmp_path, caplog):
    cfg = fast(tmp_path, "method=lwtr")
    here = RunLayout.of(cfg)
    for orphan in (here.root / ".s1_ner.x1.tmp", here.method_dir / ".augment.x2.tmp",
                   here.method_dir / ".s4_generator.checkpoints.x3.tmp"):
        orphan.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_json(here.root / ".locks" / "lwtr.json", {"pid": int(dead.stdout), "host": socket.gethostname(),
                                                     "started": "then", "command": "killed"})
    with caplog.at_level("INFO"):                                        # as the scripts log
        run_method(cfg)
    assert "augment: running (new)" in here.log_path.read_text()          # the run's own log, in its folder
    assert here.log_path == here.method_dir / "run.log"
    assert not list(here.root.rglob(".*.tmp"))
    assert f"PID {int(dead.stdout)}" in caplog.text and "taking it over" in caplog.text
    assert not (here.root / ".locks" / "lwtr.json").exists()       # released


def test_stage_folders_and_files_get_the_users_permissions(fast, tmp_path):
    old = os.umask(0o022)
    try:
        data = run_method(fast(tmp_path), until=layout.DATA)[layout.DATA]
    finally:
        os.umask(old)
    assert data.stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in data.iterdir()} == {0o644}


# --------------------------------------------------------------------------- signals

def interrupt_at(cfg, delay: float, signum: int) -> tuple[int, float]:
    """Run S0-S1 and send ``signum`` to this process after ``delay`` s; the exit code a script would
    give and when the signal was sent (wall clock)."""
    forget_signals()
    sent: list[float] = []

    def send() -> None:
        sent.append(time.time())
        os.kill(os.getpid(), signum)

    timer = threading.Timer(delay, send)
    try:
        timer.start()
        run_method(cfg, until=layout.S1)
        check_interrupted()
        timer.join()                 # it finished first: the signal still reaches the process
        time.sleep(1.0)
        return 0, sent[0]
    except Interrupted as stop:
        timer.join()
        return stop.exit_code, sent[0]
    finally:
        forget_signals()


@pytest.mark.slow
def test_a_signal_at_any_moment_of_s1_exits_130_or_143_and_stamps_nothing_it_interrupted(fast, tmp_path):
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    handle_signals()
    try:
        settings = ["method=gold_only", "ner.epochs=4"]
        start_time = time.monotonic()
        run_method(fast(tmp_path / "reference", *settings), until=layout.S1)
        duration = time.monotonic() - start_time
        results = []
        for i in range(20):
            signum = signal.SIGTERM if i % 2 else signal.SIGINT
            cfg = fast(tmp_path / f"try{i}", *settings)
            code, sent = interrupt_at(cfg, duration * i / 19, signum)
            here = RunLayout.of(cfg)
            stamped = {name: (here.stage(name) / STAMP).stat().st_mtime
                       for name in (layout.DATA, layout.S1) if (here.stage(name) / STAMP).exists()}
            results.append((i, signal.Signals(signum).name, code, sorted(stamped)))
            assert code == 128 + signum, results
            assert all(when < sent for when in stamped.values()), results   # nothing stamped after the signal
            assert not list(here.root.rglob(".*.tmp")), results
        print(f"S1 took {duration:.1f} s; {results}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_signal_swallowed_by_a_library_still_keeps_the_stage_unstamped(tmp_path):
    from aclm.base import signals

    def build(out: Path) -> dict:
        (out / "model.bin").write_text("weights")
        signals._received.append(signal.SIGTERM)    # the handler recorded it, then raised ...
        try:
            raise Interrupted(signal.SIGTERM)
        except BaseException:                       # ... into a tqdm __del__ or a trainer that dropped it
            pass
        return {}

    forget_signals()
    try:
        with pytest.raises(Interrupted):
            run_stage("s4_generator", tmp_path / "s4_generator", {"a": 1}, [], build)
        assert not (tmp_path / "s4_generator").exists() and not list(tmp_path.glob(".*.tmp"))
    finally:
        forget_signals()


# --------------------------------------------------------------------------- what a stage says

def test_a_stage_says_why_it_runs(tmp_path, caplog):
    source = tmp_path / "input.txt"
    source.write_text("one")
    out = tmp_path / "stage"
    build = lambda o: (o / "x").write_text("x") and {}  # noqa: E731

    def reason(config: dict, force: bool = False) -> str:
        caplog.clear()
        run_stage("demo", out, config, [source], build, force=force, roots=[tmp_path], code={"m": "1"})
        found = re.search(r"demo: running \((.*)\)", caplog.text)
        return found.group(1) if found else "up to date"

    with caplog.at_level("INFO"):
        assert reason({"a": {"b": 1}}) == "new"
        assert reason({"a": {"b": 1}}) == "up to date"
        assert reason({"a": {"b": 2}}) == "config changed: a.b"
        source.write_text("two")
        assert reason({"a": {"b": 2}}) == "input changed: input.txt"
        assert reason({"a": {"b": 2}}, force=True) == "forced"
        (out / "x").unlink()
        assert reason({"a": {"b": 2}}) == "its files were changed or deleted"


def test_a_full_disk_says_no_space_left_and_names_the_folder(tmp_path, monkeypatch):
    def torn(out: Path) -> dict:
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0: "
                           "basic_ios::clear: iostream error")

    def full(out: Path) -> dict:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(NoSpace, match=f"no space left on device: s1_ner could not write {tmp_path / 's1'}"):
        run_stage("s1_ner", tmp_path / "s1", {}, [], full)
    with pytest.raises(RuntimeError, match="iostream"):               # a plain failure stays itself
        run_stage("s1_ner", tmp_path / "s1", {}, [], torn)
    monkeypatch.setattr(stages.shutil, "disk_usage", lambda path: SimpleNamespace(free=0))
    with pytest.raises(NoSpace, match="no space left on device"):
        run_stage("s1_ner", tmp_path / "s1", {}, [], torn)
    assert not (tmp_path / "s1").exists()


@pytest.mark.slow
def test_a_disk_full_at_the_start_is_one_line(tiny_models, tmp_path):
    """The first write of a run is its lock's holder record: a full disk there ends the run in one line."""
    done = subprocess.run([sys.executable, "-c", "import sys; from aclm.engine import locks; import errno\n"
                           "def full(path, record): raise OSError(errno.ENOSPC, 'No space left on device')\n"
                           "locks.write_json = full\n"
                           "sys.argv = ['run_method.py', *sys.argv[1:]]\n"
                           "import runpy; runpy.run_path('scripts/run_method.py', run_name='__main__')",
                           "profile=tiny", "method=gold_only", f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: no space left on device: ")
    assert "Traceback" not in done.stderr


def test_reading_the_checkout_takes_no_git_lock(tmp_path, monkeypatch):
    """A signal arriving while a stamp asks git for the commit must never leave .git/index.lock behind."""
    from aclm.engine import code

    seen = tmp_path / "env"
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nenv >> {seen}\necho 0123\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    code.checkout.cache_clear()
    try:
        assert code.checkout()["commit"] == "0123"
    finally:
        code.checkout.cache_clear()
    assert "GIT_OPTIONAL_LOCKS=0" in seen.read_text().splitlines()


def test_a_file_system_without_flock_stops_the_run_at_its_first_lock_naming_the_folder(fast, tmp_path,
                                                                                         monkeypatch):
    from filelock import _unix

    from aclm.engine.locks import NoFlock

    def no_flock(fd: int) -> bool:                       # what Lustre mounted without -o flock answers
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(_unix, "lock_fd_nonblocking", no_flock)
    cfg = fast(tmp_path, "method=gold_only")
    setting = RunLayout.of(cfg).root
    with pytest.raises(NoFlock, match=re.escape(f"{setting / '.locks'}: this file system does not support flock")):
        run_method(cfg)
    assert not list(tmp_path.rglob(STAMP))


# --------------------------------------------------------------------------- nothing added

def test_a_method_whose_s6_keeps_nothing_fails_or_is_flagged(fast, tmp_path):
    # the consistency filter of a tagger that learned nothing drops every LwTR sentence
    nothing = ["method=lwtr", "postprocess.consistency_filter=true", "ner.epochs=1"]
    with pytest.raises(NoAugmentation, match="S6 kept none"):
        run_method(fast(tmp_path, *nothing, "postprocess.on_nothing_added=fail"))
    here = RunLayout.of(fast(tmp_path, *nothing))
    assert not here.stage(layout.S6).exists() and not here.result_path.exists()
    flagged = read_json(run_method(fast(tmp_path, *nothing))[layout.S7_EVAL] / layout.RESULT)
    assert flagged["augmentation"]["added"] == 0 and "S6 kept none" in flagged["warnings"][0]
