"""Cached, atomic stages."""

import pytest

from aclm.io import read_json
from aclm.stages import STAMP, run_stage


def writer(calls, text="x"):
    def build(tmp):
        calls.append(tmp)
        (tmp / "out.txt").write_text(text)
        return {"n": len(calls)}
    return build


def test_second_run_is_skipped(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a")
    calls = []
    assert run_stage("s", tmp_path / "s", {"k": 1}, [src], writer(calls))
    assert not run_stage("s", tmp_path / "s", {"k": 1}, [src], writer(calls))
    assert len(calls) == 1
    assert read_json(tmp_path / "s" / STAMP)["facts"] == {"n": 1}


def test_config_or_input_change_reruns(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a")
    calls = []
    run_stage("s", tmp_path / "s", {"k": 1}, [src], writer(calls))
    run_stage("s", tmp_path / "s", {"k": 2}, [src], writer(calls))
    src.write_text("b")
    run_stage("s", tmp_path / "s", {"k": 2}, [src], writer(calls))
    assert len(calls) == 3


def test_rerunning_upstream_reruns_downstream(tmp_path):
    calls = []
    run_stage("a", tmp_path / "a", {}, [], writer(calls))
    run_stage("b", tmp_path / "b", {}, [tmp_path / "a"], writer(calls))
    run_stage("a", tmp_path / "a", {}, [], writer(calls), force=True)   # same content, new run
    assert run_stage("b", tmp_path / "b", {}, [tmp_path / "a"], writer(calls))


def test_failed_stage_leaves_nothing_behind(tmp_path):
    def broken(tmp):
        (tmp / "half.txt").write_text("partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run_stage("s", tmp_path / "s", {}, [], broken)
    assert list(tmp_path.iterdir()) == []


def test_failed_rerun_keeps_the_previous_output(tmp_path):
    run_stage("s", tmp_path / "s", {"k": 1}, [], writer([]))

    def broken(tmp):
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run_stage("s", tmp_path / "s", {"k": 2}, [], broken)
    assert (tmp_path / "s" / "out.txt").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["s"]


def test_missing_input_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        run_stage("s", tmp_path / "s", {}, [tmp_path / "nope"], writer([]))


def test_a_deleted_or_truncated_output_reruns_the_stage(tmp_path):
    calls = []
    run_stage("s", tmp_path / "s", {}, [], writer(calls, "complete"))
    (tmp_path / "s" / "out.txt").unlink()
    assert run_stage("s", tmp_path / "s", {}, [], writer(calls, "complete"))
    (tmp_path / "s" / "out.txt").write_text("cut")
    assert run_stage("s", tmp_path / "s", {}, [], writer(calls, "complete"))
    assert not run_stage("s", tmp_path / "s", {}, [], writer(calls, "complete"))
