"""Gold-only tuned on dev (aclm/stages/tuned.py): one tagger per learning rate, the best on dev kept."""

from __future__ import annotations

import pytest

from aclm.base.config import ConfigError, load_config
from aclm.base.io import read_json
from aclm.run.chain import chain, run_to_result
from aclm.stages import layout
from aclm.stages.ner import s7_stage
from aclm.stages.tuned import s7_tuned_stage


def test_gold_only_tuned_trains_a_tagger_of_its_own_on_the_gold_alone():
    steps = chain(load_config(["profile=tiny", "method=gold_only_tuned"]))
    assert [s.name for s in steps] == [layout.DATA, layout.S7, layout.S7_EVAL]
    assert steps[1].stage is s7_tuned_stage and steps[1].inputs == {"data": layout.DATA}


def test_any_method_given_rates_tunes_its_s7_and_without_them_trains_as_before():
    tuned = chain(load_config(["profile=tiny", "method=lwtr", "tuning.learning_rates=[0.01,0.02]"]))
    plain = chain(load_config(["profile=tiny", "method=lwtr"]))
    assert tuned[-2].stage is s7_tuned_stage and tuned[-2].inputs["s6_postprocess"] == layout.S6
    assert plain[-2].stage is s7_stage


def test_gold_only_refuses_rates_its_s1_would_not_read():
    with pytest.raises(ConfigError, match="method=gold_only_tuned"):
        load_config(["profile=tiny", "method=gold_only", "tuning.learning_rates=[0.01]"])


def test_a_rate_of_0_is_refused_on_load():
    with pytest.raises(ConfigError, match="tuning.learning_rates"):
        load_config(["profile=tiny", "method=gold_only_tuned", "tuning.learning_rates=[0.01,0]"])


@pytest.mark.slow
def test_the_kept_tagger_is_the_rate_with_the_best_dev_f1(tiny_models, shared_data, tmp_path):
    from aclm.stages.ner import evaluate_on
    from aclm.stages.outputs import gold
    from aclm.steps.ner import load_tagger

    rates = [1e-7, 1e-3, 3e-3]       # the first learns nothing in 10 epochs, the others something
    cfg = load_config(["profile=tiny", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}",
                       f"run_dir={tmp_path}", "method=gold_only_tuned", "ner.epochs=10",
                       f"tuning.learning_rates=[{','.join(map(str, rates))}]"])
    scores = run_to_result(cfg)
    training = read_json(scores / layout.RESULT)["training"]
    by_rate = training["dev_f1_by_lr"]
    assert set(by_rate) == {str(r) for r in rates} and len(set(by_rate.values())) > 1   # a choice to make
    best = max(rates, key=lambda r: by_rate[str(r)])
    assert training["chosen_lr"] == best
    s7 = scores.parent / layout.S7
    kept = load_tagger(s7 / layout.MODEL)        # the weights kept are the chosen rate's: its dev F1 again
    dev_f1 = evaluate_on(kept, gold(s7.parent.parent / layout.DATA, "dev"), 64, None)[0]["f1"]
    assert dev_f1 == pytest.approx(by_rate[str(best)])
    assert sorted(p.parent.name for p in s7.rglob(layout.MODEL)) == [s7.name]      # no candidate's weights left
    assert all((s7 / f"lr-{r}" / "loss.tsv").is_file() for r in rates)             # each one's dev curve stays
