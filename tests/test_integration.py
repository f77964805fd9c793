"""Integration on the real data in ../shared/data (or $ACLM_DATA_DIR); skipped when it is absent."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aclm.base.data import read_conll
from aclm.base.io import read_json
from aclm.base.splits import type_shares
from aclm.run.chain import run_to_result
from aclm.stages.data import data_splits
from aclm.stages.layout import RunLayout

pytestmark = pytest.mark.slow


def test_make_splits_on_multiconer_en(shared_data, tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        proc = subprocess.run([sys.executable, "scripts/make_splits.py", "dataset=multiconer/en", "splits.seed=1",
                               f"data_dir={shared_data}", "--out", str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    full = type_shares(read_conll(shared_data / "multiconer" / "en" / "train_full.conll"))
    for size in (100, 200, 500, 1000):
        name = f"train_{size}.conll"
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), "same seed, same file"
        sample = read_conll(outs[0] / name)
        assert abs(len(sample) - size) <= 0.07 * size    # iterative stratification: 94-107 for 100 over seeds 1-5
        shares = type_shares(sample)
        for etype, share in full.items():
            assert abs(shares[etype] - share) <= 2.0, (size, etype, shares[etype], share)


def test_gold_only_multiconer_en_100(shared_data, fast, tmp_path):
    cfg = fast(tmp_path, "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}", "ner.epochs=1")
    result = read_json(run_to_result(cfg) / "result.json")
    assert result["sizes"]["test:multiconer/en"] == 2000
    assert abs(result["sizes"]["train"] - 100) <= 5
    assert set(result["per_type"]) <= {"PER", "LOC", "GRP", "CORP", "CW", "PROD"}
    assert result["gold"] == 100 and result["seed"] == 1


def test_aclm_chain_multiconer_en_100(shared_data, fast, tmp_path):
    cfg = fast(tmp_path, "method=aclm", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}",
               "ner.epochs=1")
    result = read_json(run_to_result(cfg) / "result.json")
    assert result["method"] == "aclm"
    run = RunLayout.of(cfg)
    for stage in ("s2_keywords", "s3_templates", "s4_generator", "s5_generation", "s6_postprocess", "s7_ner"):
        assert (run.stage(stage) / "_stage.json").exists(), stage
    keywords = read_json(run.stage("s2_keywords") / "_stage.json")["facts"]["train"]
    assert keywords["with_keywords"] > 0.5 * keywords["sentences"]
    assert result["augmentation"]["generation"]["generated"] == 2 * result["augmentation"]["gold"]


def test_released_samples_and_carved_dev(shared_data, fast, tmp_path):
    released = read_conll(shared_data / "multiconer" / "de" / "train_200.conll")
    for seed in (1, 2):   # the default (auto) reads the released sample: seeds vary training only
        cfg = fast(tmp_path, "dataset=multiconer/de", "gold=200", f"seed={seed}", "splits.dev_size=null",
                   f"data_dir={shared_data}")
        train, dev = data_splits(cfg)
        assert [s.tokens for s in train] == [s.tokens for s in released] and len(dev) == 800
    cfg = fast(tmp_path, "dataset=multiconer/de", "gold=200", "splits.dev_size=gold", f"data_dir={shared_data}")
    assert abs(len(data_splits(cfg)[1]) - len(released)) <= 0.1 * len(released)  # the paper's downsampled dev

    stratified = [data_splits(fast(tmp_path, "dataset=multiconer/de", "gold=200", "splits.source=stratified",
                                 f"splits.seed={s}", f"data_dir={shared_data}"))[0] for s in (1, 1, 2)]
    assert [x.tokens for x in stratified[0]] == [x.tokens for x in stratified[1]]
    assert [x.tokens for x in stratified[0]] != [x.tokens for x in stratified[2]]
    assert [x.tokens for x in stratified[0]] != [s.tokens for s in released]

    cfg = fast(tmp_path, "dataset=tdmsci", "gold=200", "splits.dev_size=gold", f"data_dir={shared_data}")
    train, dev = data_splits(cfg)   # no released sample, no dev file: stratified, dev carved out of train
    assert abs(len(train) - 200) <= 10 and abs(len(dev) - len(train)) <= 20
    assert {s.meta["source"] for s in train}.isdisjoint(s.meta["source"] for s in dev)   # file:line of each
