"""Tables of any runs never average runs of different profiles or settings as if they were seeds.

The result.json files are written by hand, as `aclm/stages/ner.py` writes them (identity, scores, and the
merged `config` of the run's stages), under a run tree in a temporary folder.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pandas as pd
import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.tables.aggregate import write_report
from aclm.tables.tabulate_runs import find_runs, tabulate


def config(profile: str, method: str, dataset: str, gold, seed: int, **sections) -> dict:
    """A merged stage config as result.json records it (with where-files-live keys that must not matter)."""
    base = {"profile": profile, "method": method, "variant": "", "setting_variant": "", "dataset": dataset,
            "gold": gold, "seed": seed, "test_datasets": [], "language": None,
            "splits": {"source": "auto", "seed": 1, "dev_size": None},
            "ner": {"epochs": 2 if profile == "smoke" else 100, "lr": 0.01, "eval_batch_size": 64}}
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values} if isinstance(values, dict) else values
    return base


def write_run(runs, profile: str, method: str, seed: int, f1: float, dataset: str = "multiconer/en", gold=100,
              variant: str = "", setting_variant: str = "", new_fields: bool = True, test_size: int = 500,
              data: dict | None = None, **sections) -> None:
    setting = f"seed{seed}" + (f"@{setting_variant}" if setting_variant else "")
    root = runs / profile / dataset / f"gold{gold}" / setting
    method_dir = f"{method}@{variant}" if variant else method
    out = root / "s1_eval" if method == "gold_only" else root / method_dir / "s7_eval"
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(profile, method, dataset, gold, seed, **sections)
    cfg.update(variant=variant, setting_variant=setting_variant)
    record = {"method": method, "profile": profile, "dataset": dataset, "gold": gold, "seed": seed, "f1": f1,
              "dev_f1": f1, "test": {dataset: {"f1": f1}}, "per_type": {"PER": {"f1": f1 + 1}}, "sizes": {f"test:{dataset}": test_size},
              "config": cfg, "config_hash": "not-checked", **({"data": data} if data else {})}
    if new_fields:
        record.update(variant=variant, setting_variant=setting_variant)
    (out / "result.json").write_text(json.dumps(record))


def write_failed(runs, profile: str, method: str, seed: int, overrides: str = "") -> None:
    out = runs / profile / "multiconer/en" / "gold100" / f"seed{seed}" / method / "s7_eval"
    out.mkdir(parents=True, exist_ok=True)
    command = (f"python scripts/run_method.py method={method} profile={profile} dataset=multiconer/en gold=100 "
               f"seed={seed} run_dir=/elsewhere {overrides}")
    (out / "failed.json").write_text(json.dumps({"error": "RuntimeError: out of memory", "returncode": 1,
                                                 "command": command}))


def f1_table(runs) -> pd.DataFrame:
    (_, report), *_ = tabulate([str(runs / "**" / "result.json")])
    return report


@pytest.fixture
def two_profiles(tmp_path):
    """The case that went wrong: Gold-only on one setting and seed under smoke (F1 0.79) and mini (25.87)."""
    runs = tmp_path / "runs"
    write_run(runs, "smoke", "gold_only", 1, 0.79)
    write_run(runs, "mini", "gold_only", 1, 25.87, data_dir="/elsewhere", device="cuda")
    return runs


def test_two_profiles_are_never_one_entry(two_profiles):
    report = f1_table(two_profiles)
    wide = report.table.set_index("method")
    assert list(report.table.columns) == ["method", "mini: multiconer/en gold100", "mini: multiconer/en gold100 (dev)",
                                          "smoke: multiconer/en gold100", "smoke: multiconer/en gold100 (dev)"]
    assert wide.loc["Gold-only", "mini: multiconer/en gold100"] == "25.87"
    assert wide.loc["Gold-only", "smoke: multiconer/en gold100"] == "0.79"
    assert "13.33" not in report.markdown and (report.summary["n"] == 1).all()


def test_two_profiles_in_the_per_type_table_are_rows_named_by_profile(two_profiles):
    _, (_, per_type) = tabulate([str(two_profiles)])
    types = per_type.table.set_index(["profile", "dataset", "gold", "method"])
    assert types.loc[("mini", "multiconer/en", "100", "Gold-only"), "PER"] == "26.87"
    assert types.loc[("smoke", "multiconer/en", "100", "Gold-only"), "PER"] == "1.79"


@pytest.fixture
def one_profile(tmp_path):
    """Under one profile: ACLM with generator.epochs 10 (seeds 1, 2) and 20 (seed 1), Gold-only over three seeds
    whose configs differ only in seed, where files live and the device, and Gold-only in a setting variant."""
    runs = tmp_path / "runs"
    for seed, (f1, where) in enumerate([(30.0, {}), (32.0, {"storage": {"keep_final_tagger": False}}),
                                        (34.0, {"run_dir": "/scratch/runs", "device": "cuda"})], 1):
        write_run(runs, "mini", "gold_only", seed, f1, data_dir=f"/data{seed}", **where)
    write_run(runs, "mini", "gold_only", 1, 20.0, setting_variant="ner.epochs=2", ner={"epochs": 2})
    write_run(runs, "mini", "aclm", 1, 40.0, generator={"epochs": 10, "lr": 3e-4})
    write_run(runs, "mini", "aclm", 2, 42.0, generator={"epochs": 10, "lr": 3e-4}, new_fields=False)
    write_run(runs, "mini", "aclm", 1, 50.0, variant="x", generator={"epochs": 20, "lr": 3e-4})
    write_run(runs, "mini", "aclm", 3, 60.0, variant="x", generator={"epochs": 5, "lr": 3e-4})
    write_run(runs, "mini", "lwtr", 1, 45.0, lwtr={"p": 0.3})
    write_run(runs, "mini", "lwtr", 2, 47.0, lwtr={"p": 0.3}, storage={"keep_final_tagger": False})
    return runs


def test_runs_differing_in_a_key_are_separate_labelled_entries(one_profile):
    report = f1_table(one_profile)
    wide = report.table.set_index("method")["multiconer/en gold100"]
    assert wide["ACLM"] == "41.00 ± 1.41"                          # seeds of one config: one entry
    assert wide["ACLM @x [generator.epochs=5]"] == "60.00"          # the variant's two configs: two entries
    assert wide["ACLM @x [generator.epochs=20]"] == "50.00"
    assert not [text for text in wide if text.startswith("55.00")]
    assert list(wide.index).index("ACLM @x [generator.epochs=5]") < list(wide.index).index(
        "ACLM @x [generator.epochs=20]")
    assert "generator.epochs" in report.markdown and "storage.*" in report.markdown


def test_seeds_of_one_config_average_into_one_entry(one_profile):
    wide = f1_table(one_profile).table.set_index("method")["multiconer/en gold100"]
    assert wide["Gold-only"] == f"32.00 ± {statistics.stdev([30, 32, 34]):.2f}"    # run_dir, device, storage: same
    assert wide["Gold-only [ner.epochs=2]"] == "20.00"                               # the setting variant's own
    assert wide["LwTR"] == "46.00 ± 1.41"


def test_runs_scored_on_other_test_sets_or_cut_from_other_data_are_never_one_entry(tmp_path):
    """The case that went wrong: seeds scored on 2,000 and on 500 test sentences averaged into one entry."""
    runs = tmp_path / "runs"
    write_run(runs, "mini", "gold_only", 1, 80.0, test_size=2000)
    write_run(runs, "mini", "gold_only", 2, 90.0, test_size=500)
    wide = f1_table(runs).table.set_index("method")["multiconer/en gold100"]
    assert set(wide) == {"80.00", "90.00"}
    assert "Gold-only [test set multiconer/en=2000 sentences]" in wide.index
    same_size = tmp_path / "same_size"        # one size, other contents; then other gold data
    write_run(same_size, "mini", "gold_only", 1, 80.0, data={"test": {"multiconer/en": "a" * 64}})
    write_run(same_size, "mini", "gold_only", 2, 90.0, data={"test": {"multiconer/en": "b" * 64}})
    write_run(same_size, "mini", "gold_only", 3, 70.0, data={"test": {"multiconer/en": "b" * 64},
                                                             "gold": {"train_100.conll": "c" * 64}})
    wide = f1_table(same_size).table.set_index("method")["multiconer/en gold100"]
    assert set(wide) == {"80.00", "90.00", "70.00"}
    assert any("aaaaaaaa" in label for label in wide.index)


def test_welch_compares_the_unlabelled_aclm_with_the_best_baseline(one_profile):
    report = f1_table(one_profile)
    assert report.significance.iloc[0]["best"] == "lwtr" and report.significance.iloc[0]["method_id"] == "aclm"


def test_a_config_that_is_not_recorded_never_joins_one_that_is(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "mini", "gold_only", 1, 30.0)
    old = runs / "mini" / "multiconer/en" / "gold100" / "seed2" / "s1_eval"
    old.mkdir(parents=True)
    (old / "result.json").write_text(json.dumps({"method": "gold_only", "profile": "mini", "dataset": "multiconer/en",
                                                 "gold": 100, "seed": 2, "f1": 40.0}))
    wide = f1_table(runs).table.set_index("method")["multiconer/en gold100"]
    assert wide["Gold-only"] == "30.00" and wide["Gold-only [config not recorded]"] == "40.00"


def test_a_failed_run_joins_the_config_its_command_names(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "mini", "aclm", 1, 40.0, generator={"epochs": 10})
    write_run(runs, "mini", "aclm", 1, 50.0, variant="x", generator={"epochs": 20})
    write_run(runs, "mini", "aclm", 2, 42.0, generator={"epochs": 20})
    write_failed(runs, "mini", "aclm", 3, "generator.epochs=20")
    write_failed(runs, "mini", "aclm", 4, "generator.epochs=30")
    wide = f1_table(runs).table.set_index("method")["multiconer/en gold100"]
    assert wide["ACLM [generator.epochs=20]"] == "42.00 [n=1]"           # seed 3 failed: one of two seeds in
    assert wide["ACLM [generator.epochs=10]"] == "40.00"
    assert wide["ACLM [generator.epochs=30]"].startswith("FAILED: RuntimeError")
    assert {r.label for r in find_runs([str(runs)]) if r.seed == 3} == {"generator.epochs=20"}


def test_the_script_writes_labelled_entries_to_every_format(two_profiles, one_profile, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "scripts/tabulate_runs.py", str(tmp_path / "runs" / "**" / "result.json"),
                           "--out", str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| ACLM @x [generator.epochs=20] |" in proc.stdout and "smoke: multiconer/en gold100" in proc.stdout
    csv = pd.read_csv(out / "f1.csv")
    assert set(csv["method_id"]) >= {"aclm", "aclm@x[generator.epochs=5]", "gold_only@[ner.epochs=2]"}
    assert len(csv[(csv["column"] == "smoke: multiconer/en gold100") & (csv["method_id"] == "gold_only")]) == 1
    assert r"ACLM @x [generator.epochs=20]" in (out / "f1.tex").read_text()


def test_write_report_still_writes_each_format(one_profile, tmp_path):
    written = [p.name for grid, report in tabulate([str(one_profile)]) for p in write_report(report, grid, tmp_path)]
    assert sorted(written) == ["f1.csv", "f1.md", "f1.png", "f1.tex", "per_type.csv", "per_type.md", "per_type.tex"]


def test_older_results_without_a_config_stay_one_entry_with_their_failed_seed(tmp_path):
    runs = tmp_path / "runs"
    for seed, f1 in ((1, 40.0), (2, 42.0)):
        out = runs / "mini" / "multiconer/en" / "gold100" / f"seed{seed}" / "aclm" / "s7_eval"
        out.mkdir(parents=True)
        (out / "result.json").write_text(json.dumps({"method": "aclm", "profile": "mini", "dataset": "multiconer/en",
                                                     "gold": 100, "seed": seed, "f1": f1}))
    write_failed(runs, "mini", "aclm", 3)
    wide = f1_table(runs).table.set_index("method")["multiconer/en gold100"]
    assert list(wide.index) == ["ACLM"] and wide["ACLM"] == "41.00 ± 1.41 [n=2]"
