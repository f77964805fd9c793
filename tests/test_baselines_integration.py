"""Every baseline end to end on real data with the tiny models (skipped without ../shared/data)."""

from __future__ import annotations

import pytest

from aclm.base.registry import METHODS
from aclm.stages import layout, outputs
from aclm.run.chain import run_to_result, run_method
from aclm.stages.layout import RunLayout

pytestmark = pytest.mark.slow


#: every baseline of the method table that needs no other method's run (WikiNEuRal, on conll2003/en, is tested below)
BASELINES = tuple(m.name for m in METHODS.values() if m.generation == "augment" and not m.needs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.mark.parametrize("method", BASELINES)
def test_baseline_end_to_end(method, runs, shared_data, fast):
    cfg = fast(runs, f"method={method}", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}",
               "ner.epochs=1", "generator.lr=0.01")
    result = outputs.result(run_to_result(cfg))
    report = result["augmentation"]
    assert result["method"] == method and report["method"] == method
    assert RunLayout.of(cfg).aug_path.exists()
    assert report["added"] == report["postprocess"]["kept"]
    assert 0.0 <= report["dropped_share"] <= 1.0
    assert set(report["diversity"] or {}) <= {"diversity_e", "diversity_n", "diversity_l"}
    if method in ("lwtr", "melm") and report["added"]:  # augmentations with a source sentence
        assert report["diversity"] is not None
    assert result["sizes"]["train"] == report["gold"] + report["added"]


@pytest.mark.parametrize("method", ("lwtr", "daga"))
def test_same_seed_same_augmentations(method, shared_data, fast, tmp_path):
    written = []
    for run in ("a", "b"):
        cfg = fast(tmp_path / run, f"method={method}", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}",
                   "ner.epochs=1")
        written.append((run_method(cfg, until=layout.AUGMENT)[layout.AUGMENT] / layout.GENERATIONS).read_bytes())
    assert written[0] == written[1]


def test_wikineural_silver_baseline(runs, shared_data, fast):
    cfg = fast(runs, "method=wikineural", "dataset=conll2003/en", "gold=200", f"data_dir={shared_data}",
               "ner.epochs=1", "ner.tagger=bilstm_crf", "ner.hidden_size=32", "ner.rnn_layers=1")
    result = outputs.result(run_to_result(cfg))
    report = result["augmentation"]
    assert report["added"] == report["generation"]["requested"] == 2 * report["gold"]   # R x gold without ACLM
    assert result["config"]["ner"]["tagger"] == "bilstm_crf"


def test_wikineural_refuses_another_label_set(shared_data, fast, tmp_path):
    cfg = fast(tmp_path, "method=wikineural", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}")
    with pytest.raises(Exception, match="types"):
        run_method(cfg)
