"""Cached, atomic stages."""

import hashlib

import pytest

from aclm.base.io import read_json
from aclm.engine import STAMP, Pruned, planning, prune
from aclm.engine.stages import pruned_files, run_stage


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


def model_writer(calls):
    def build(tmp):
        calls.append(tmp)
        (tmp / "best-model.pt").write_bytes(b"weights" * 100)
        (tmp / "config.json").write_text("{}")
    return build


def test_pruning_a_models_weights_keeps_it_and_its_consumers_current(tmp_path):
    calls = []
    run_stage("train", tmp_path / "train", {}, [], model_writer(calls))
    run_stage("score", tmp_path / "score", {}, [tmp_path / "train"], writer(calls), loads=[tmp_path / "train"])
    assert prune(tmp_path / "train") == 700
    assert not (tmp_path / "train" / "best-model.pt").exists() and (tmp_path / "train" / "config.json").exists()
    assert pruned_files(tmp_path / "train") == {"best-model.pt": hashlib.sha256(b"weights" * 100).hexdigest()}
    assert not run_stage("train", tmp_path / "train", {}, [], model_writer(calls))
    assert not run_stage("score", tmp_path / "score", {}, [tmp_path / "train"], writer(calls),
                         loads=[tmp_path / "train"])
    assert len(calls) == 2
    assert prune(tmp_path / "train") == 0                                   # nothing left to delete


def test_a_stage_that_must_run_on_pruned_weights_asks_for_them_back(tmp_path):
    calls = []
    run_stage("train", tmp_path / "train", {}, [], model_writer(calls))
    prune(tmp_path / "train")
    with pytest.raises(Pruned) as gone:
        run_stage("score", tmp_path / "score", {}, [tmp_path / "train"], writer(calls), loads=[tmp_path / "train"])
    assert gone.value.stage_dir == tmp_path / "train" and len(calls) == 1
    # a stage that does not open the weights runs on
    assert run_stage("report", tmp_path / "report", {}, [tmp_path / "train"], writer(calls))
    # rebuilt, the stage is whole again
    assert run_stage("train", tmp_path / "train", {}, [], model_writer(calls), force=True)
    assert pruned_files(tmp_path / "train") == {} and (tmp_path / "train" / "best-model.pt").exists()


def test_nothing_is_pruned_while_planning(tmp_path):
    run_stage("train", tmp_path / "train", {}, [], model_writer([]))
    with planning():
        assert prune(tmp_path / "train") == 0
    assert (tmp_path / "train" / "best-model.pt").exists()


# --- a hub model is its cached snapshot ---------------------------------------------------------------------------

def cached_snapshot(cache, repo, commit):
    """Lay out ``repo`` in a Hugging Face cache as a download of ``commit`` on its default branch leaves it."""
    folder = cache / ("models--" + repo.replace("/", "--"))
    (folder / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (folder / "snapshots" / commit / "config.json").write_text("{}")
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_a_newer_download_of_a_hub_model_reruns_the_stage_reading_it(tmp_path, hub_cache):
    from aclm.engine.identity import model_reads as model_folders

    config = {"ner": {"model": "org/encoder"}}
    cached_snapshot(hub_cache, "org/encoder", "a" * 40)
    assert model_folders(config) == {"model ner.model": {"hub revision": "a" * 40}}
    calls = []
    assert run_stage("s", tmp_path / "s", config, [], writer(calls), reads=model_folders(config))
    assert not run_stage("s", tmp_path / "s", config, [], writer(calls), reads=model_folders(config))
    cached_snapshot(hub_cache, "org/encoder", "b" * 40)       # the same name, downloaded again after an update
    with planning(), pytest.raises(Exception, match="changed: model ner.model"):
        run_stage("s", tmp_path / "s", config, [], writer(calls), reads=model_folders(config))
    assert run_stage("s", tmp_path / "s", config, [], writer(calls), reads=model_folders(config))
    assert len(calls) == 2


def test_a_hub_model_the_stage_downloads_is_stamped_with_what_it_read(tmp_path, hub_cache):
    from aclm.engine.identity import model_reads as model_folders

    config = {"generator": {"model": "org/generator"}}
    calls = []

    def downloading(tmp):                  # as from_pretrained does on its first call with a network
        cached_snapshot(hub_cache, "org/generator", "c" * 40)
        return writer(calls)(tmp)

    assert model_folders(config) == {"model generator.model": {"hub revision": None}}
    assert run_stage("s", tmp_path / "s", config, [], downloading, reads=model_folders(config))
    stamped = read_json(tmp_path / "s" / STAMP)["identity"]["reads"]
    assert stamped == {"model generator.model": {"hub revision": "c" * 40}}
    assert not run_stage("s", tmp_path / "s", config, [], writer(calls), reads=model_folders(config))


def test_a_hub_model_updated_while_the_stage_runs_is_never_stamped(tmp_path, hub_cache):
    from aclm.engine.identity import model_reads as model_folders
    from aclm.engine.stages import NotKept

    config = {"ner": {"model": "org/encoder"}}
    cached_snapshot(hub_cache, "org/encoder", "a" * 40)

    def updating(tmp):                     # another process downloads a newer revision meanwhile
        cached_snapshot(hub_cache, "org/encoder", "b" * 40)
        return writer([])(tmp)

    with pytest.raises(NotKept, match="s: a newer revision of a hub model it read reached the Hugging Face cache"):
        run_stage("s", tmp_path / "s", config, [], updating, reads=model_folders(config))
    assert not (tmp_path / "s").exists()


def test_a_path_that_is_no_hub_id_is_not_taken_for_a_hub_model(tmp_path, hub_cache):
    from aclm.engine.identity import model_reads as model_folders

    assert model_folders({"ner": {"model": "models/mini/no-such-folder"}}) == {}


def test_a_file_is_known_by_its_bytes_whatever_its_times_say(tmp_path, monkeypatch):
    """A digest is kept per version of a file (device, inode, size, times); bytes swapped under a kept size and
    modification time are a new version, since the change time moves with every write."""
    import os
    import time

    from aclm.base import io

    monkeypatch.setenv("ACLM_CACHE", str(tmp_path / "cache"))
    later = time.time_ns() + 10 * 10**9                     # every file here has settled
    monkeypatch.setattr(io.time, "time_ns", lambda: later)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * (2 << 20))                   # large: its digest is kept on disk too
    first = io.file_digest(weights)
    assert first == hashlib.sha256(b"a" * (2 << 20)).hexdigest() and list((tmp_path / "cache").rglob("*-*"))
    stat = weights.stat()
    weights.write_bytes(b"b" * (2 << 20))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert io.file_digest(weights) == hashlib.sha256(b"b" * (2 << 20)).hexdigest()


def test_a_new_key_at_its_schema_default_is_no_change_and_any_other_value_is():
    from aclm.engine.identity import differences

    before = {"config": {"generation": {"top_k": 10}}, "code": {}, "inputs": {}, "version": 1}
    now = {**before, "config": {"generation": {"top_k": 10, "spare": 3}}}
    assert differences(before, now, {"generation.spare": 3}) is None
    assert differences(before, now, {"generation.spare": 4}) == "config changed: generation.spare"
    assert differences(before, now) == "config changed: generation.spare"           # no default: a change
