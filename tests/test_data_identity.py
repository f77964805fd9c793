"""Data by content: a data folder of symlinks to the same files is the same data; other files make their own
result beside the first, never over it; the published files keep the plain folder."""

from __future__ import annotations

import shutil

from aclm.base.datasets import data_variant, pins
from aclm.base.paths import PROJECT_ROOT
from aclm.run.chain import plan, run_method
from aclm.stages.layout import RunLayout


def sample_folder(where):
    """The bundled English sample laid out under the multiconer/en entry (files MultiCoNER's pins do not hold)."""
    folder = where / "multiconer" / "en"
    folder.mkdir(parents=True)
    for split, name in (("train", "train_full"), ("dev", "dev"), ("test", "test")):
        shutil.copy(PROJECT_ROOT / "data" / "sample" / "en" / f"{split}.conll", folder / f"{name}.conll")
    return where


def test_the_published_files_run_in_the_plain_folder_and_a_copy_that_differs_in_its_own():
    assert pins()["data/sample/en/train.conll"]                     # the bundled sample is pinned
    assert data_variant("sample/en", None) == ""
    assert RunLayout.of(_config("sample/en")).dataset == "sample/en"


def test_a_data_folder_of_symlinks_to_the_same_files_is_the_same_data(fast, tmp_path):
    original = sample_folder(tmp_path / "data")
    linked = tmp_path / "linked" / "multiconer" / "en"
    linked.mkdir(parents=True)
    for path in (original / "multiconer" / "en").iterdir():
        (linked / path.name).symlink_to(path)
    words = ("method=lwtr", "dataset=multiconer/en", "gold=full")
    run_method(fast(tmp_path / "runs", *words, f"data_dir={original}"))
    again = fast(tmp_path / "runs", *words, f"data_dir={tmp_path / 'linked'}")
    assert all(state == "current" for _, state in plan(again))
    assert RunLayout.of(again).dataset.startswith("multiconer/en+data-")   # not MultiCoNER's published files


def test_other_data_files_write_their_own_result_and_leave_the_first(fast, tmp_path):
    first = sample_folder(tmp_path / "first")
    other = tmp_path / "other"
    shutil.copytree(first, other)
    train = other / "multiconer" / "en" / "train_full.conll"
    train.write_text(train.read_text(encoding="utf-8").replace("\tB-PER", "\tB-LOC", 1), encoding="utf-8")
    words = ("method=gold_only", "dataset=multiconer/en", "gold=full")
    done = run_method(fast(tmp_path / "runs", *words, f"data_dir={first}"))
    result = (list(done.values())[-1] / "result.json").read_bytes()
    cfg = fast(tmp_path / "runs", *words, f"data_dir={other}")
    assert dict(plan(cfg))["data"] == "new"                          # its own folder, not the first's
    run_method(cfg)
    assert RunLayout.of(cfg).root != list(done.values())[-1].parent
    assert (list(done.values())[-1] / "result.json").read_bytes() == result


def _config(dataset: str):
    from aclm.base.config import load_config

    return load_config(["profile=tiny", "method=gold_only", f"dataset={dataset}"])
