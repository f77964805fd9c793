"""The "the rest takes" line: each stage still to run counted from what is known, none counted as no time."""
import json

from aclm.engine.stages import STAMP
from omegaconf import OmegaConf

from aclm.base.config import load_config
from aclm.run import estimates
from aclm.run.estimates import duration, guesses, rest
from aclm.stages import layout

MINI = load_config(["profile=mini", "run_dir=/nonexistent"])
TO_DO = [layout.S7, layout.S7_EVAL]


def stage(tmp_path, name, seconds, **facts):
    folder = tmp_path / name
    folder.mkdir(parents=True)
    (folder / STAMP).write_text(json.dumps({"stage": name, "seconds": seconds, "facts": facts}))
    return folder


def test_s7_is_counted_from_this_runs_s1_scaled_by_its_training_sentences(tmp_path):
    done = {layout.S1: stage(tmp_path, layout.S1, 30.0, train=100, training={"seconds": {"train": 10.0}}),
            layout.S1_EVAL: stage(tmp_path, layout.S1_EVAL, 20.0),
            layout.S6: stage(tmp_path, layout.S6, 0.1, added=50)}
    line = rest(guesses(MINI, {layout.S7: None, layout.S7_EVAL: None}, done))
    assert line.startswith("the rest takes up to about 55 s")             # 30 + 10 * 50/100, then 20


def test_s7_is_counted_from_this_runs_own_size_before_other_runs_s7(tmp_path):
    """Another run's S7 (400 s, on another number of sentences) counts only until this run's S1 and S6 are done."""
    done = {layout.S1: stage(tmp_path, layout.S1, 30.0, train=100, training={"seconds": {"train": 10.0}}),
            layout.S6: stage(tmp_path, layout.S6, 0.1, added=500)}
    assert guesses(MINI, {layout.S7: 400.0}, done) == {layout.S7: 80.0}          # 30 + 10 * 500/100
    assert guesses(MINI, {layout.S7: 400.0}, {layout.S1: done[layout.S1]}) == {layout.S7: 400.0}


def test_a_recorded_time_comes_before_the_siblings(tmp_path):
    done = {layout.S1_EVAL: stage(tmp_path, layout.S1_EVAL, 30.0)}
    assert "about 4.0 min" in rest(guesses(MINI, {layout.S7_EVAL: 240.0}, done))


def test_unknown_stages_are_named_never_counted_as_nothing(tmp_path):
    nothing = rest({layout.S4: None, layout.S5: None})
    assert nothing == f"no estimate yet for the rest ({layout.S4}, {layout.S5}: neither run nor measured in this profile)"
    partly = rest({layout.S5: None, layout.S6: 0.02})
    assert partly.startswith(f"the rest takes under 1 s for {layout.S6}, more for the others ({layout.S5}:")
    assert " 0 " not in nothing + partly and "0.0" not in nothing + partly
    assert rest({layout.S6: 0.02}).startswith("the rest takes under 1 s (")


def test_a_first_run_counts_from_its_profiles_measured_run_of_the_same_recipe(tmp_path, monkeypatch):
    setting = tmp_path / "mini" / "multiconer" / "en" / "gold100" / "seed1"
    setting.mkdir(parents=True)
    for name, seconds in ((layout.S4, 300.0), (layout.S5, 60.0)):
        folder = stage(setting, name, seconds)
        stamped = json.loads((folder / STAMP).read_text())
        (folder / STAMP).write_text(json.dumps({**stamped, "threads": 2, "finished": f"2026-11-28T20:0{seconds // 100}",
                                                "checkout": {"commit": "0123456789abcdef", "dirty": False}}))
    monkeypatch.setattr(estimates, "MEASURED", tmp_path / "stage_seconds.json")
    estimates.record(setting, "mini", {}, "make run PROFILE=mini")
    estimates.record(setting, "mini", {"ner.epochs": 20}, "make demo")
    entry = estimates.measured_run(OmegaConf.merge(MINI, {"ner": {"epochs": 20}}))
    assert (entry["command"], entry["commit"], entry["threads"]) == ("make demo", "0123456", [2])
    assert estimates.measured_run(MINI)["command"] == "make run PROFILE=mini"       # the profile's own recipe
    assert rest(guesses(MINI, {layout.S4: None, layout.S5: 30.0})).startswith("the rest takes up to about 5.5 min")
    assert estimates.measured_run(OmegaConf.merge(MINI, {"profile": "tiny"})) is None


def test_durations_read_as_seconds_then_minutes():
    assert [duration(s) for s in (0.02, 1.4, 89, 90, 600)] == ["under 1 s", "1 s", "89 s", "1.5 min", "10.0 min"]


def test_s7s_scoring_is_counted_from_s1s_in_this_profiles_runs_when_this_run_has_none(tmp_path):
    cfg = load_config(["profile=mini", f"run_dir={tmp_path}"])
    stage(tmp_path / "mini" / "multiconer" / "en" / "gold100" / "seed1@gold_only", layout.S1_EVAL, 12.0)
    assert guesses(cfg, {layout.S7_EVAL: None}) == {layout.S7_EVAL: 12.0}


def test_a_tuned_s7_counts_one_tagger_a_rate(tmp_path):
    runs = tmp_path / "mini" / "multiconer" / "en" / "gold100" / "seed1"
    for name, seconds, config in ((layout.S1, 100.0, {}), (f"lwtr/{layout.S7}", 200.0, {})):
        folder = runs / name
        folder.mkdir(parents=True)
        (folder / STAMP).write_text(json.dumps({"stage": name, "seconds": seconds, "config": config}))
    tuned = load_config(["profile=mini", f"run_dir={tmp_path}", "method=gold_only_tuned"])
    aclm = load_config(["profile=mini", f"run_dir={tmp_path}", "method=aclm", "tuning.learning_rates=[0.01,0.02]"])
    assert estimates.recorded_seconds(tuned, layout.S7) == 400.0          # the gold alone: S1's 100 s, 4 rates
    assert estimates.recorded_seconds(aclm, layout.S7) == 400.0           # LwTR's untuned S7, twice
    assert estimates.recorded_seconds(load_config(["profile=mini", f"run_dir={tmp_path}"]), layout.S7) == 200.0


def test_an_untuned_s7_counted_from_tuned_ones_is_one_tagger_of_theirs(tmp_path):
    """Only a tuned Gold-only's S7 (4 rates, 400 s) recorded: an untuned ACLM S7 is 100 s, never 0."""
    folder = stage(tmp_path / "mini" / "a" / "gold_only_tuned", layout.S7, 400.0)
    (folder / STAMP).write_text(json.dumps({"stage": layout.S7, "seconds": 400.0,
                                            "config": {"tuning": {"learning_rates": [0.005, 0.01, 0.02, 0.05]}}}))
    aclm = load_config(["profile=mini", f"run_dir={tmp_path}", "method=aclm"])
    assert estimates.recorded_seconds(aclm, layout.S7) == 100.0


def test_a_span_taggers_s7_is_counted_only_from_span_taggers(tmp_path):
    """GLiNER's S7 is not flair's: neither a flair S7 of the profile, nor S1, nor the measured run counts it."""
    cfg = load_config(["profile=mini", f"run_dir={tmp_path}", "method=gliner_finetuned"])
    flair = stage(tmp_path / "mini" / "a" / "aclm", layout.S7, 500.0)
    (flair / STAMP).write_text(json.dumps({"stage": layout.S7, "seconds": 500.0, "config": {"ner": {}}}))
    done = {layout.S1: stage(tmp_path / "mini" / "a", layout.S1, 30.0, train=100,
                             training={"seconds": {"train": 10.0}})}          # a flair S1 of the profile
    assert guesses(cfg, {layout.S7: estimates.recorded_seconds(cfg, layout.S7)}, done) == {layout.S7: None}
    span = stage(tmp_path / "mini" / "b" / "gliner_finetuned", layout.S7, 400.0)
    (span / STAMP).write_text(json.dumps({"stage": layout.S7, "seconds": 400.0, "config": {"gliner": {}}}))
    assert estimates.recorded_seconds(cfg, layout.S7) == 400.0
    flair_run = load_config(["profile=mini", f"run_dir={tmp_path}", "method=aclm"])
    assert estimates.recorded_seconds(flair_run, layout.S7) == 500.0
