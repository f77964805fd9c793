"""Aggregation of hand-made result JSONs into a paper table (aclm/tables/aggregate.py): statistics, gaps, failures,
Welch's test; and the tables of any runs (aclm/tables/tabulate_runs.py)."""

import json
import math
import os
import shutil
import statistics
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import Cell, GridError, expand, load_grid
from aclm.run.chain import run_method
from aclm.tables.aggregate import build_report, entry_text, write_report
from aclm.tables.runs import Run, of_cell
from conftest import FAST

GRID = """
title: "Test table"
reference: {{file: {reference}}}
seeds: [1, 2, 3]
method_names: {{gold_only: Gold-only, lwtr: LwTR, aclm: ACLM}}
index: {{gold: "{{gold}}", method: "{{method_name}}"}}
blocks:
  - datasets: [multiconer/en]
    sizes: [100, 200, 500]
    methods: [gold_only, lwtr, aclm]
    columns: {{en: f1, en_hi: test.multiconer/hi.f1}}
derived: {{avg: [en, en_hi]}}
compare: {{method: aclm, baselines: [gold_only, lwtr]}}
plot: {{x: gold, y: [en, avg]}}
"""

REFERENCE = """gold,method,en,en_hi,avg
100,Gold-only,29.36,16.36,22.86
100,LwTR,48.60,32.36,40.48
100,ACLM,48.76,32.52,40.64
200,Gold-only,51.83,36.90,44.37
200,LwTR,52.88,40.07,46.48
200,ACLM,54.99,45.22,50.11
"""

# (gold, method) -> {seed: (en F1, en->hi F1)}; gold 500 has no runs at all.
SCORES = {
    (100, "gold_only"): {1: (10, 50), 2: (12, 52), 3: (14, 54)},
    (100, "lwtr"): {1: (20, 40), 2: (22, 41), 3: (24, 42)},
    (100, "aclm"): {1: (30, 45), 2: (31, 46), 3: (35, 49)},
    (200, "gold_only"): {1: (40, 30)},        # one seed of three
    (200, "aclm"): {1: (50, 35), 2: (52, 37)},  # two seeds of three
}


# Seed 3 ran with uncommitted changes; ACLM's first seed at 100 finished with S6's warning, LwTR's second
# with a tagger that learned nothing (dev F1 0, which results from before the scoring stage said so record only).
WARNED = {(100, "aclm", 1): {"warnings": ["S6 kept none of the augmentations: S7 is Gold-only's tagger"]},
          (100, "lwtr", 2): {"dev_f1": 0.0}}


def write_result(cell: Cell, en: float, hi: float) -> None:
    cell.layout.result_path.parent.mkdir(parents=True, exist_ok=True)
    checkout = {"commit": "c0ffee1" + "0" * 33, "dirty": cell.seed == 3, "diff_sha256": "d1ff000" + "f" * 57}
    cell.layout.result_path.write_text(json.dumps({"method": cell.method, "seed": cell.seed, "f1": en,
                                            "test": {"multiconer/en": {"f1": en}, "multiconer/hi": {"f1": hi}},
                                            "checkout": checkout, "config_hash": f"hash-{cell.method}",
                                            **WARNED.get((cell.gold, cell.method, cell.seed), {})}))


def write_failed(cell: Cell, error: str) -> None:
    cell.layout.failed_path.parent.mkdir(parents=True, exist_ok=True)
    cell.layout.failed_path.write_text(json.dumps({"error": error, "returncode": 1}))


@pytest.fixture
def table(tmp_path):
    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "toy.yaml").write_text(GRID.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"))
    for cell in cells:
        scores = SCORES.get((cell.gold, cell.method), {})
        if cell.seed in scores:
            write_result(cell, *scores[cell.seed])
        elif (cell.gold, cell.method) == (200, "lwtr"):
            write_failed(cell, "RuntimeError: CUDA out of memory")
    report = build_report(grid, cells, "paper")
    return grid, report


def entry(report, gold: str, method: str, column: str) -> pd.Series:
    s = report.summary
    found = s[(s["gold"] == gold) & (s["method_id"] == method) & (s["column"] == column)]
    assert len(found) == 1
    return found.iloc[0]


def test_three_seeds_give_mean_std_and_the_paper_number(table):
    _, report = table
    row = entry(report, "100", "gold_only", "en")
    assert row["n"] == 3 and row["mean"] == pytest.approx(12.0) and row["std"] == pytest.approx(2.0)
    assert row["paper"] == pytest.approx(29.36) and row["diff"] == pytest.approx(12.0 - 29.36)
    assert entry_text(row) == "12.00 ± 2.00 (29.36; -17.36)"
    wide = report.table.set_index(["gold", "method"])
    assert wide.loc[("100", "Gold-only"), "en"] == "12.00 ± 2.00 (29.36; -17.36)"
    assert wide.loc[("100", "ACLM"), "en_hi"].startswith("46.67 ± 2.08 (32.52; +14.15)")


def test_derived_average_is_taken_per_seed(table):
    _, report = table
    row = entry(report, "100", "aclm", "avg")
    per_seed = [(30 + 45) / 2, (31 + 46) / 2, (35 + 49) / 2]
    assert row["mean"] == pytest.approx(statistics.mean(per_seed))
    assert row["std"] == pytest.approx(statistics.stdev(per_seed))
    assert row["paper"] == pytest.approx(40.64)


def test_a_missing_cell_shows_as_missing(table):
    _, report = table
    row = entry(report, "500", "aclm", "en")
    assert row["status"] == "missing" and row["n"] == 0 and math.isnan(row["mean"])
    wide = report.table.set_index(["gold", "method"])
    assert wide.loc[("500", "ACLM"), "en"] == "— (—)"        # no paper number for 500 in this reference
    assert wide.loc[("500", "ACLM"), "avg"] == "— (—)"


def test_a_failed_cell_shows_its_error(table):
    _, report = table
    row = entry(report, "200", "lwtr", "en")
    assert row["status"] == "failed" and row["error"] == "RuntimeError: CUDA out of memory"
    wide = report.table.set_index(["gold", "method"])
    assert wide.loc[("200", "LwTR"), "en"] == "FAILED: RuntimeError: CUDA out of memory (52.88)"
    assert "RuntimeError: CUDA out of memory" in report.markdown


def test_every_failed_run_is_listed_not_each_error_once(table):
    _, report = table
    assert "runs failed 3, missing 12" in report.markdown   # LwTR at 200 failed; 500 never ran, nor 3 seeds at 200
    for seed in (1, 2, 3):
        assert f"- 200 LwTR en seed {seed}: RuntimeError: CUDA out of memory" in report.markdown
    assert "200 LwTR avg seed" not in report.markdown            # a derived column repeats no run


def test_a_seed_that_finished_with_a_warning_counts_and_is_marked(table):
    _, report = table
    aclm, lwtr = entry(report, "100", "aclm", "en"), entry(report, "100", "lwtr", "en")
    assert (aclm["n"], aclm["warned"], lwtr["n"], lwtr["warned"]) == (3, 1, 3, 1)
    assert entry_text(aclm) == "32.00 ± 2.65 (48.76; -16.76) [warned: 1]"
    assert entry(report, "100", "gold_only", "en")["warned"] == 0
    assert "- 100 ACLM en seed 1: S6 kept none of the augmentations" in report.markdown
    assert "- 100 LwTR en seed 2: its tagger learned nothing (dev F1 0)" in report.markdown


def test_the_report_names_the_code_that_made_each_entry(table, tmp_path):
    grid, report = table
    assert "Code: c0ffee1 (9 runs), c0ffee1+d1ff000 (3 runs)" in report.markdown
    write_report(report, grid, tmp_path / "results")
    csv = pd.read_csv(tmp_path / "results" / "toy.csv", dtype={"gold": str}).set_index(["gold", "method_id", "column"])
    assert csv.loc[("100", "aclm", "en"), "commits"] == "c0ffee1, c0ffee1+d1ff000"
    assert csv.loc[("200", "aclm", "en"), "commits"] == "c0ffee1"
    assert csv.loc[("100", "aclm", "en"), "config_hashes"] == "hash-aclm"


def test_different_seed_counts_per_cell_show_n(table):
    _, report = table
    one, two = entry(report, "200", "gold_only", "en"), entry(report, "200", "aclm", "en")
    assert (one["n"], one["expected"], two["n"], two["expected"]) == (1, 3, 2, 3)
    assert entry_text(one) == "40.00 (51.83; -11.83) [n=1]"
    assert entry_text(two) == "51.00 ± 1.41 (54.99; -3.99) [n=2]"
    assert two["seeds"] == "1,2"


def test_welch_test_against_the_best_baseline_per_column(table):
    _, report = table
    sig = report.significance.set_index(["gold", "column"])
    # en: LwTR (mean 22) beats Gold-only (12); en_hi: Gold-only (52) beats LwTR (41)
    assert sig.loc[("100", "en"), "best"] == "lwtr"
    assert sig.loc[("100", "en"), "p_value"] == pytest.approx(
        stats.ttest_ind([30, 31, 35], [20, 22, 24], equal_var=False).pvalue)
    assert sig.loc[("100", "en_hi"), "best"] == "gold_only"
    assert sig.loc[("100", "en_hi"), "p_value"] == pytest.approx(
        stats.ttest_ind([45, 46, 49], [50, 52, 54], equal_var=False).pvalue)
    # gold 200: the only baseline with results has one seed -> no test
    assert sig.loc[("200", "en"), "best"] == "gold_only" and math.isnan(sig.loc[("200", "en"), "p_value"])
    wide = report.table
    p_rows = wide[wide["method"].str.startswith("p: ACLM")].set_index("gold")
    assert p_rows.loc["100", "en"].startswith("LwTR: p=")
    assert p_rows.loc["200", "en"] == "Gold-only: n/a"


def test_every_entry_is_tested_against_the_control_when_the_grid_names_one(tmp_path):
    """compare.control: each method's entry against the control's in its column and group, the control's own and
    a dev column untested; the p after the entry and in the CSV."""
    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    text = GRID.format(reference=tmp_path / "ref.csv").replace("baselines: [gold_only, lwtr]}",
                                                               "baselines: [gold_only, lwtr], control: gold_only}")
    (tmp_path / "grids" / "toy.yaml").write_text(text)
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"))
    for cell in cells:
        if cell.seed in SCORES.get((cell.gold, cell.method), {}):
            write_result(cell, *SCORES[(cell.gold, cell.method)][cell.seed])
    report = build_report(grid, cells, "paper")
    lwtr = stats.ttest_ind([20, 22, 24], [10, 12, 14], equal_var=False).pvalue
    assert entry(report, "100", "lwtr", "en")["p_control"] == pytest.approx(lwtr)
    assert entry(report, "100", "aclm", "en_hi")["p_control"] == pytest.approx(
        stats.ttest_ind([45, 46, 49], [50, 52, 54], equal_var=False).pvalue)
    assert math.isnan(entry(report, "100", "gold_only", "en")["p_control"])
    assert math.isnan(entry(report, "200", "aclm", "en")["p_control"])        # the control has one seed there
    wide = report.table.set_index(["gold", "method"])
    assert wide.loc[("100", "LwTR"), "en"] == f"22.00 ± 2.00 (48.60; -26.60) [p={lwtr:.2g}] [warned: 1]"
    assert "[p=" not in wide.loc[("100", "Gold-only"), "en"] and "against Gold-only" in report.markdown
    write_report(report, grid, tmp_path / "results")
    csv = pd.read_csv(tmp_path / "results" / "toy.csv", dtype={"gold": str})
    assert csv[(csv["method_id"] == "lwtr") & (csv["column"] == "en")]["p_control"].iloc[0] == pytest.approx(lwtr)


def test_a_misspelt_compare_key_is_an_error(tmp_path):
    (tmp_path / "grids").mkdir()
    text = GRID.format(reference=tmp_path / "ref.csv").replace("baselines: [gold_only, lwtr]}",
                                                               "baselines: [gold_only, lwtr], controls: gold_only}")
    (tmp_path / "grids" / "toy.yaml").write_text(text)
    with pytest.raises(GridError, match="compare: unknown keys \\['controls'\\]"):
        load_grid("toy", tmp_path / "grids")


def test_files_are_written(table, tmp_path):
    grid, report = table
    written = write_report(report, grid, tmp_path / "results")
    assert sorted(p.suffix for p in written) == [".csv", ".md", ".png", ".tex"]
    csv = pd.read_csv(tmp_path / "results" / "toy.csv", dtype={"gold": str})
    aclm = csv[(csv["gold"] == "100") & (csv["method_id"] == "aclm") & (csv["column"] == "en")].iloc[0]
    assert aclm["best_baseline"] == "lwtr" and aclm["p_value"] == pytest.approx(
        stats.ttest_ind([30, 31, 35], [20, 22, 24], equal_var=False).pvalue)
    tex = (tmp_path / "results" / "toy.tex").read_text()
    assert r"12.00 $\pm$ 2.00" in tex and r"en\_hi" in tex


def test_a_failed_s1_is_blamed_for_its_methods(tmp_path):
    cell = Cell("paper", "multiconer/en", 100, "aclm", 1, str(tmp_path))
    write_failed(cell.prerequisites()[0], "error: no such file")
    run = of_cell(cell)
    assert (run.status, run.result, run.error) == ("failed", None, "S1 failed: error: no such file")


def test_table3_reads_diversity_and_computes_perplexity_once(tmp_path, tiny_models):
    from aclm.tables.perplexity import perplexity
    from aclm.tables.aggregate import PerplexityCache

    grid = load_grid("table3")
    cells = expand(grid, "tiny", runs=str(tmp_path / "runs"), sizes="200", methods="aclm", seeds="1,2")
    sentences = {1: ["john lives in paris", "mary went home"], 2: ["the river bank"]}
    for cell in cells:
        write_result(cell, 50.0, 20.0)
        result = json.loads(cell.layout.result_path.read_text())
        diversity = {"diversity_e": 40.0 + cell.seed, "diversity_n": 20.0, "diversity_l": 5.0}
        result["augmentation"] = {"diversity": diversity}
        result["config"] = {"analysis": {"perplexity_model": "models/tiny/gpt2", "batch_size": 4}}
        cell.layout.result_path.write_text(json.dumps(result))
        cell.layout.aug_path.parent.mkdir(parents=True)
        cell.layout.aug_path.write_text("".join("".join(f"{w}\tO\n" for w in s.split()) + "\n" for s in sentences[cell.seed]))
    cache = PerplexityCache(tmp_path / "cache.json", device="cpu")
    report = build_report(grid, cells, "tiny", cache)
    expected = [perplexity(sentences[s], "models/tiny/gpt2", device="cpu") for s in (1, 2)]
    assert entry(report, "200", "aclm", "perplexity")["mean"] == pytest.approx(statistics.mean(expected))
    assert entry(report, "200", "aclm", "perplexity")["paper"] == pytest.approx(80.77)
    assert entry(report, "200", "aclm", "diversity_e")["mean"] == pytest.approx(41.5)
    assert len(json.loads((tmp_path / "cache.json").read_text())) == 2


def test_perplexity_is_scored_again_for_rebuilt_weights_or_edited_scoring_code(tmp_path, tiny_models, monkeypatch):
    from aclm.tables import aggregate as module
    from aclm.tables.aggregate import PerplexityCache

    scored = []
    monkeypatch.setattr(module, "perplexity", lambda texts, *a, **k: scored.append(texts) or 10.0 * len(scored))
    model = tmp_path / "gpt2"                     # one name throughout, as models/tiny/gpt2 keeps across rebuilds
    shutil.copytree(tiny_models / "gpt2", model)
    cell = Cell("tiny", "multiconer/en", 100, "aclm", 1, str(tmp_path / "runs"))
    cell.layout.aug_path.parent.mkdir(parents=True)
    cell.layout.aug_path.write_text("john\tB-PER\nlives\tO\n\n")
    run = Run("tiny", "multiconer/en", 100, "aclm", 1, cell.layout.result_path,
              result={"config": {"analysis": {"perplexity_model": str(model), "batch_size": 4}}})
    path = tmp_path / "cache.json"
    assert PerplexityCache(path)(run) == 10.0
    assert PerplexityCache(path)(run) == 10.0 and len(scored) == 1          # read back, not scored
    weights = model / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))   # the same bytes
    assert PerplexityCache(path)(run) == 10.0 and len(scored) == 1
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))                                                  # weights rebuilt
    assert PerplexityCache(path)(run) == 20.0
    edited = PerplexityCache(path)
    edited.code = {**edited.code, "aclm.tables.perplexity": "edited"}
    assert edited(run) == 30.0 and len(scored) == 3


def test_an_empty_aug_file_has_no_perplexity(tmp_path, monkeypatch):
    # a method that kept no augmentation writes an empty aug.conll: no sentences, not an error
    from aclm.tables import aggregate as module
    from aclm.tables.aggregate import PerplexityCache

    seen = []
    monkeypatch.setattr(module, "perplexity", lambda texts, *a, **k: seen.append(texts))
    cell = Cell("tiny", "multiconer/en", 100, "aclm", 1, str(tmp_path))
    cell.layout.aug_path.parent.mkdir(parents=True)
    cell.layout.aug_path.write_text("")
    run = Run("tiny", "multiconer/en", 100, "aclm", 1, cell.layout.result_path,
              result={"config": {"analysis": {"perplexity_model": "models/tiny/gpt2", "batch_size": 4}}})
    assert PerplexityCache(tmp_path / "cache.json")(run) is None
    assert seen == [[]]


def test_sweep_points_are_rows_of_their_own(tmp_path):
    grid = load_grid("melm_table2")
    cells = expand(grid, "tiny", runs=str(tmp_path / "runs"), sizes="100", seeds="1,2")
    assert {(c.method, c.variant) for c in cells} == {("gold_only", ""), ("mulda", ""), ("melm", ""),
                                                      ("melm", "melm.code_mix-true")}
    for cell in cells:
        score = {"gold_only": 70.0, "mulda": 72.0, "melm": 80.0 if cell.variant else 75.0}[cell.method] + cell.seed
        cell.layout.result_path.parent.mkdir(parents=True, exist_ok=True)
        cell.layout.result_path.write_text(json.dumps({"test": {d: {"f1": score} for d in (
            "conll2003/en", "conll2003/de", "conll2002/es", "conll2002/nl")}}))
    report = build_report(grid, cells, "tiny")
    rows = {line.split("|")[2].strip(): line for line in report.markdown.splitlines() if line.startswith("| 100")}
    assert "81.50 ± 0.71 (80.96" in rows["MELM"] and "76.50 ± 0.71 (78.71" in rows["MELM-gold"]
    assert "MELM-gold" in rows["p: MELM vs best baseline"]   # the best baseline is MELM without code-mixing


def test_the_report_names_the_test_sets_of_the_paper_and_of_our_runs(tmp_path):
    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    named = GRID.replace("reference: {{file: {reference}}}",
                         'reference: {{file: {reference}, test_set: "the official test (200000 sentences)"}}')
    (tmp_path / "grids" / "toy.yaml").write_text(named.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"), sizes="100,200", seeds="1")
    line = "Test sets. Paper: the official test (200000 sentences). Ours: multiconer/en (multiconer/en/test.conll"
    assert f"{line}, no run scored yet)." in build_report(grid, cells, "paper").markdown
    for cell in cells:
        write_result(cell, 50.0, 40.0)
        result = json.loads(cell.layout.result_path.read_text())
        result["sizes"] = {"train": 100, "dev": 800, "test:multiconer/en": 2000, "test:multiconer/hi": 1999}
        cell.layout.result_path.write_text(json.dumps(result))
    report = build_report(grid, cells, "paper")
    assert (f"{line}, 2000 sentences); multiconer/hi (multiconer/hi/test.conll, 1999 sentences)."
            in report.markdown)
    write_report(report, grid, tmp_path / "results")
    assert "the official test (200000 sentences)" in (tmp_path / "results" / "toy.tex").read_text()


def test_a_grid_without_a_test_set_prints_none(table):
    _, report = table
    assert "Test sets." not in report.markdown


AVERAGED = """
title: "Averaged"
reference: {{file: {reference}, test_set: "the official tests"}}
seeds: [1, 2]
method_names: {{gold_only: Gold-Only, aclm: ACLM}}
index: {{gold: "{{gold}}", method: "{{method_name}}"}}
blocks:
  - datasets: [multiconer/en]
    sizes: [200]
    methods: [gold_only, aclm]
    overrides: {{test_datasets: [multiconer/hi]}}
    columns: &types {{PER: per_type.PER.f1, LOC: per_type.LOC.f1}}
  - datasets: [multiconer/de, multiconer/zh]
    sizes: [200]
    methods: [gold_only, aclm]
    columns: *types
average_datasets: true
compare: {{method: aclm, baselines: [gold_only]}}
"""

# (dataset, method) -> PER F1 of seeds 1 and 2 (LOC is PER - 10)
PER = {("multiconer/en", "gold_only"): (30, 34), ("multiconer/de", "gold_only"): (40, 42),
       ("multiconer/zh", "gold_only"): (20, 20),
       ("multiconer/en", "aclm"): (50, 50), ("multiconer/de", "aclm"): (60, 66), ("multiconer/zh", "aclm"): (40, 40)}


def test_averaged_tables_take_each_seeds_mean_over_the_datasets(tmp_path):
    (tmp_path / "ref.csv").write_text("gold,method,PER,LOC\n200,Gold-Only,30.0,20.0\n200,ACLM,50.0,40.0\n")
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "avg.yaml").write_text(AVERAGED.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("avg", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"))
    for cell in cells:
        per = PER[(cell.dataset, cell.method)][cell.seed - 1]
        if (cell.dataset, cell.method, cell.seed) == ("multiconer/zh", "aclm", 2):
            write_failed(cell, "RuntimeError: CUDA out of memory")
            continue
        cell.layout.result_path.parent.mkdir(parents=True, exist_ok=True)
        cell.layout.result_path.write_text(json.dumps({"per_type": {"PER": {"f1": per}, "LOC": {"f1": per - 10}}}))
    report = build_report(grid, cells, "paper")
    gold = entry(report, "200", "gold_only", "PER")     # seed 1: (30 + 40 + 20) / 3, seed 2: (34 + 42 + 20) / 3
    assert gold["n"] == 2 and gold["values"] == pytest.approx([30.0, 32.0])
    assert gold["std"] == pytest.approx(statistics.stdev([30.0, 32.0])) and gold["paper"] == pytest.approx(30.0)
    assert entry(report, "200", "gold_only", "LOC")["mean"] == pytest.approx(21.0)
    aclm = entry(report, "200", "aclm", "PER")          # seed 2 lacks zh: it does not count
    assert aclm["n"] == 1 and aclm["expected"] == 2 and aclm["values"] == pytest.approx([50.0])
    assert "multiconer/zh: RuntimeError: CUDA out of memory" in report.markdown
    assert ("per seed, the mean over 3 datasets (multiconer/de, multiconer/en, multiconer/zh)"
            in report.markdown)


def test_the_report_states_the_settings_the_paper_leaves_open_and_those_that_differ(tmp_path):
    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "toy.yaml").write_text(GRID.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"), sizes="100,200", seeds="1")
    for cell in cells:
        write_result(cell, 50.0, 40.0)
        if cell.method == "aclm":
            result = json.loads(cell.layout.result_path.read_text())
            # gold 100 decoded under the grammar; gold 200 predates the key; both used one generator and sigma
            shared = {"generator": {"model": "models/tiny/mbart-large-50"}, "gold": cell.gold, "seed": cell.seed,
                      "run_dir": str(cell.runs), "generation": {"mixner": {"gamma_sigma": 0.3}}}
            if cell.gold == 100:
                shared["generation"]["constrained"] = "entities"
            result["config"] = shared
            cell.layout.result_path.write_text(json.dumps(result))
    markdown = build_report(grid, cells, "paper").markdown
    # the stated keys come first, equal or not; a key that differs follows; where files live never shows
    assert ("Settings of aclm: generation.mixner.gamma_sigma=0.3, generator.model=models/tiny/mbart-large-50 "
            "(random weights: generated text means nothing), generation.constrained=(unset) | entities."
            in markdown)
    assert "run_dir" not in markdown and "Settings of lwtr" not in markdown


# --- tables of any runs (aclm/tables/tabulate_runs.py, scripts/tabulate_runs.py) -------------------------------------

def write_run(runs, dataset: str, gold, method: str, seed: int, f1: float, variant: str = "", folder: str = "",
              hi: float | None = None, failed: str | None = None):
    """A run's result.json (or only its failed.json) where the run tree puts it; ``folder``: a dataset folder's."""
    root = runs / "tiny" / (folder or dataset) / f"gold{gold}" / f"seed{seed}"
    method_dir = f"{method}@{variant}" if variant else method
    out = root / "s1_eval" if method == "gold_only" else root / method_dir / "s7_eval"
    out.mkdir(parents=True, exist_ok=True)
    if failed:
        command = f"python scripts/run_method.py method={method} profile=tiny dataset={dataset} gold={gold} seed={seed}"
        (out / "failed.json").write_text(json.dumps({"error": failed, "returncode": 1, "command": command}))
        return
    tests = {dataset: {"f1": f1}, **({"multiconer/hi": {"f1": hi}} if hi is not None else {})}
    (out / "result.json").write_text(json.dumps({
        "method": method, "profile": "tiny", "dataset": dataset, "gold": gold, "seed": seed, "f1": f1, "test": tests,
        "dev_f1": f1 + 1, "timings": {"data": 1.0, "s1_ner": 59.0, **({} if method == "gold_only" else {"s7_ner": f1})},
        "per_type": {"PER": {"f1": f1 + 10}, "LOC": {"f1": f1 - 10}}, "sizes": {f"test:{dataset}": 500}}))


@pytest.fixture
def any_runs(tmp_path):
    """German at 300 gold (in no grid), English at 100 with en->hi, a dataset folder's runs, a failure, a variant."""
    runs = tmp_path / "runs"
    for seed, (gold, lwtr, aclm) in enumerate([(30, 40, 45), (32, 41, 47), (34, 42, 50)], 1):
        write_run(runs, "multiconer/de", 300, "gold_only", seed, gold)
        write_run(runs, "multiconer/de", 300, "lwtr", seed, lwtr)
        write_run(runs, "multiconer/de", 300, "aclm", seed, aclm)
        write_run(runs, "multiconer/en", 100, "gold_only", seed, gold, hi=10 + seed)
        write_run(runs, "multiconer/en", 100, "aclm", seed, aclm, hi=20 + seed)
        write_run(runs, "/data/german", "full", "gold_only", seed, gold, folder="local/german-1a2b3c4d")
    write_run(runs, "multiconer/de", 300, "daga", 1, 0, failed="RuntimeError: CUDA out of memory")
    write_run(runs, "multiconer/de", 300, "aclm", 4, 0, failed="error: a stale failure beside a result")
    write_run(runs, "multiconer/de", 300, "aclm", 4, 49)
    write_run(runs, "multiconer/en", 100, "melm", 1, 44, variant="melm.code_mix-true")
    return runs


def test_any_runs_make_a_table_of_methods_by_dataset_and_gold_size(any_runs):
    from aclm.tables.tabulate_runs import tabulate

    (grid, report), (_, per_type) = tabulate([str(any_runs / "**" / "result.json")])
    wide = report.table.set_index("method")
    assert list(report.table.columns) == ["method", "/data/german goldfull", "/data/german goldfull (dev)",
                                          "multiconer/de gold300", "multiconer/de gold300 (dev)",
                                          "multiconer/en gold100", "multiconer/en gold100 (dev)",
                                          "multiconer/en gold100 → multiconer/hi"]
    assert list(wide.index[:5]) == ["Gold-only", "LwTR", "DAGA", "MELM @melm.code_mix-true", "ACLM"]
    assert wide.loc["Gold-only", "/data/german goldfull"] == "32.00 ± 2.00"        # no paper: no parenthesis
    assert wide.loc["ACLM", "multiconer/de gold300"] == f"47.75 ± {statistics.stdev([45, 47, 50, 49]):.2f}"
    assert wide.loc["DAGA", "multiconer/de gold300"] == "FAILED: RuntimeError: CUDA out of memory"
    # each run's dev F1 beside its own test column, its failure said once (in the test column)
    assert wide.loc["ACLM", "multiconer/de gold300 (dev)"] == f"48.75 ± {statistics.stdev([46, 48, 51, 50]):.2f}"
    assert wide.loc["Gold-only", "/data/german goldfull (dev)"] == "33.00 ± 2.00"
    assert wide.loc["DAGA", "multiconer/de gold300 (dev)"] == "—"
    assert wide.loc["p: ACLM vs best baseline", "multiconer/de gold300 (dev)"] == ""        # no test on dev
    # ACLM's runs: 45, 47, 50 (de), 49 (de, seed 4), 45, 47, 50 (en) seconds of S7 after 60 of S0 and S1
    aclm_minutes = statistics.mean([60 + s for s in (45, 47, 50, 49, 45, 47, 50)]) / 60
    assert "Gold-only 1.0 (9), LwTR" in report.markdown and f"ACLM {aclm_minutes:.1f} (7)" in report.markdown
    assert wide.loc["ACLM", "multiconer/en gold100 → multiconer/hi"] == "22.00 ± 1.00"
    assert wide.loc["MELM @melm.code_mix-true", "multiconer/en gold100"] == "44.00"
    p = stats.ttest_ind([45, 47, 50, 49], [40, 41, 42], equal_var=False).pvalue
    assert wide.loc["p: ACLM vs best baseline", "multiconer/de gold300"] == f"LwTR: p={p:.3g}"
    assert "a stale failure" not in report.markdown
    assert "/data/german (a dataset folder, 500 sentences)" in report.markdown
    assert not [c for c in per_type.table.columns if c.endswith("(dev)")]      # a type's column is no test set
    types = per_type.table.set_index(["dataset", "gold", "method"])
    assert types.loc[("multiconer/de", "300", "ACLM"), "PER"] == f"57.75 ± {statistics.stdev([45, 47, 50, 49]):.2f}"
    assert types.loc[("multiconer/de", "300", "p: ACLM vs best baseline"), "LOC"] == f"LwTR: p={p:.3g}"
    assert grid.name == "f1"


def test_any_runs_are_tested_against_the_method_named(any_runs):
    from aclm.tables.runs import RunError
    from aclm.tables.tabulate_runs import tabulate

    (_, report), _ = tabulate([str(any_runs)], control="gold_only")
    wide = report.table.set_index("method")
    p = stats.ttest_ind([45, 47, 50, 49], [30, 32, 34], equal_var=False).pvalue
    assert wide.loc["ACLM", "multiconer/de gold300"].endswith(f" [p={p:.2g}]")
    assert "[p=" not in wide.loc["Gold-only", "multiconer/de gold300"]
    with pytest.raises(RunError, match="--against gold_only_tuned: no run of it"):
        tabulate([str(any_runs)], control="gold_only_tuned")


def test_a_run_folder_a_glob_and_a_result_file_name_the_same_runs_once(any_runs):
    from aclm.tables.tabulate_runs import find_runs

    setting = any_runs / "tiny" / "multiconer" / "de" / "gold300"
    by_folder = find_runs([str(setting)])
    assert len(by_folder) == 11 and sum(not r.result_path.exists() for r in by_folder) == 1     # DAGA failed
    by_glob = find_runs([str(setting / "*" / "*" / "s7_eval" / "result.json"), str(setting / "seed1" / "s1_eval")])
    assert {r.result_path for r in by_glob} == {r.result_path for r in by_folder if r.method != "gold_only"} | {
        setting / "seed1" / "s1_eval" / "result.json"}
    assert len(find_runs([str(setting), str(setting / "seed1")])) == 11


def test_a_paper_grid_stands_beside_the_runs_that_are_its_cells(any_runs, tmp_path):
    from aclm.tables.tabulate_runs import tabulate

    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "toy.yaml").write_text(GRID.format(reference=tmp_path / "ref.csv"))
    (_, report), _ = tabulate([str(any_runs)], str(tmp_path / "toy.yaml"))
    wide = report.table.set_index("method")
    assert wide.loc["Gold-only", "multiconer/en gold100"] == "32.00 ± 2.00 (29.36; +2.64)"
    assert wide.loc["ACLM", "multiconer/en gold100 → multiconer/hi"] == "22.00 ± 1.00 (32.52; -10.52)"
    assert wide.loc["ACLM", "multiconer/de gold300"].endswith("(—)")    # German at 300 is no cell of the grid
    assert wide.loc["DAGA", "multiconer/de gold300"] == "FAILED: RuntimeError: CUDA out of memory (—)"


def test_a_copy_of_a_run_is_an_error_not_a_fourth_seed(any_runs, tmp_path):
    import shutil

    from aclm.tables.runs import RunError
    from aclm.tables.tabulate_runs import tabulate

    seed1 = any_runs / "tiny" / "multiconer" / "de" / "gold300" / "seed1" / "aclm"
    shutil.copytree(seed1, tmp_path / "elsewhere" / "tiny" / "multiconer" / "de" / "gold300" / "seed1" / "aclm")
    with pytest.raises(RunError, match=r"have seed 1: .*seed1/aclm/s7_eval and .*seed1/aclm/s7_eval"):
        tabulate([str(any_runs), str(tmp_path / "elsewhere")])
    (_, report), _ = tabulate([str(tmp_path / "elsewhere")])        # either alone is a table
    assert report.table.set_index("method").loc["ACLM", "multiconer/de gold300"] == "45.00"


def test_the_paper_stands_beside_runs_on_the_official_test_sets_too(tmp_path):
    from aclm.tables.tabulate_runs import tabulate

    for dataset in ("multiconer/en", "multiconer_official/en"):
        for seed in (1, 2):
            write_run(tmp_path / "runs", dataset, 100, "gold_only", seed, 40 + seed)
    (_, report), _ = tabulate([str(tmp_path / "runs")], "table1")
    wide = report.table.set_index("method")
    assert wide.loc["Gold-only", "multiconer_official/en gold100"] == "41.50 ± 0.71 (29.36; +12.14)"
    assert wide.loc["Gold-only", "multiconer/en gold100"] == "41.50 ± 0.71 (29.36; +12.14)"


def test_tables_of_any_runs_are_written_as_the_grids_are(any_runs, tmp_path):
    from aclm.tables.tabulate_runs import tabulate

    written = [p for grid, report in tabulate([str(any_runs)]) for p in write_report(report, grid, tmp_path / "out")]
    assert sorted(p.name for p in written) == ["f1.csv", "f1.md", "f1.png", "f1.tex", "per_type.csv", "per_type.md",
                                               "per_type.tex"]
    csv = pd.read_csv(tmp_path / "out" / "f1.csv")
    aclm = csv[(csv["method_id"] == "aclm") & (csv["column"] == "multiconer/de gold300")].iloc[0]
    assert aclm["n"] == 4 and aclm["best_baseline"] == "lwtr"
    assert r"47.75 $\pm$" in (tmp_path / "out" / "f1.tex").read_text()


def test_a_run_found_made_by_code_changed_since_counts_with_a_warning_naming_it(fast, tmp_path):
    from aclm.base.io import read_json, write_json
    from aclm.stages.layout import S7_EVAL
    from aclm.engine import STAMP
    from aclm.tables.tabulate_runs import tabulate

    scores = run_method(fast(tmp_path / "runs", "method=lwtr"))[S7_EVAL]
    assert "baselines.lwtr" in read_json(scores.parent / "augment" / STAMP)["identity"]["code"]
    (_, report), _ = tabulate([str(scores / "result.json")])
    assert "changed since" not in report.markdown                          # made by this checkout's code
    s1 = next(tmp_path.rglob("s1_ner")) / STAMP                           # S1 ran before an edit of training
    stamp = read_json(s1)
    stamp["identity"]["code"]["aclm.stages.ner"] = "0" * 16
    write_json(s1, stamp)
    (_, report), _ = tabulate([str(scores / "result.json")])
    assert "[warned: 1]" in report.table.set_index("method").loc["LwTR"].iloc[0]
    assert "made by code that has changed since it ran: aclm.stages.ner" in report.markdown


TRAINING = ("flair", "transformers", "aclm.run.chain", "aclm.steps.ner", "aclm.steps.generator",
            "aclm.steps.generation")


def loaded_in_fresh_python(code: str) -> list[str]:
    """The training modules loaded after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport sys; print([m for m in {TRAINING!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_the_tables_import_no_training_code():
    # a table is read on a login node or laptop: flair and transformers cost seconds and gigabytes there
    code = ("import importlib, pkgutil, runpy, aclm.tables, aclm.experiments\n"
            "for p in (aclm.tables, aclm.experiments):\n"
            "    for m in pkgutil.iter_modules(p.__path__): importlib.import_module(f'{p.__name__}.{m.name}')\n"
            "for s in ('aggregate', 'tabulate_runs', 'grid'): runpy.run_path(f'scripts/{s}.py')")
    assert loaded_in_fresh_python(code) == []


def test_checking_a_finished_run_loads_no_training_library(fast, tmp_path):
    """The tables hold each result to its run's config (``Cell.is_done``): planning the chain, not training."""
    run_method(fast(tmp_path))
    overrides = tuple(o for o in FAST if not o.startswith("profile="))
    cell = f"Cell('tiny', 'sample/en', 'full', 'gold_only', 1, {str(tmp_path)!r}, overrides={overrides!r})"
    code = f"from aclm.experiments.grid import Cell\nassert {cell}.is_done()"
    assert loaded_in_fresh_python(code) == ["aclm.run.chain"]


def test_gold_only_at_twice_the_gold_is_a_row_of_each_size_whose_double_ran(table):
    from aclm.tables.aggregate import ANNOTATE_MORE

    _, report = table
    row = entry(report, "100", ANNOTATE_MORE, "en")          # Gold-only's one seed at 200, beside the 100s
    assert row["n"] == 1 and row["mean"] == pytest.approx(40.0) and pd.isna(row["paper"])
    assert not ((report.summary["gold"] == "200") & (report.summary["method_id"] == ANNOTATE_MORE)).any()
    rows = list(report.table.set_index(["gold", "method"]).index)
    assert rows[rows.index(("100", "Gold-only")) + 1] == ("100", ANNOTATE_MORE)


def test_gold_only_at_twice_the_gold_may_come_from_a_block_of_its_own(tmp_path):
    from aclm.tables.aggregate import ANNOTATE_MORE

    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    two_blocks = GRID.replace("    sizes: [100, 200, 500]\n", "    sizes: [100]\n").replace("derived:", (
        "  - datasets: [multiconer/en]\n    sizes: [200]\n    methods: [gold_only]\n"
        "    columns: {{en: f1, en_hi: test.multiconer/hi.f1}}\nderived:"))
    (tmp_path / "grids" / "toy.yaml").write_text(two_blocks.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"))
    assert {c.gold for c in cells} == {100, 200}
    for cell in cells:
        if cell.method == "gold_only":
            write_result(cell, cell.gold / 10 + cell.seed, 0)
    report = build_report(grid, cells, "paper")
    row = entry(report, "100", ANNOTATE_MORE, "en")
    assert row["n"] == 3 and row["mean"] == pytest.approx(22.0)


def test_the_parameters_a_run_fine_tunes_are_its_models_as_built(tiny_models):
    from transformers import AutoModel, AutoModelForSeq2SeqLM

    from aclm.tables.parameters import model_parameters, trained_models

    config = {"ner": {"model": "models/tiny/xlm-roberta"}, "generator": {"model": "models/tiny/mbart-large-50"},
              "lwtr": {"p": 0.3}}
    assert trained_models("aclm", config) == {"tagger": "models/tiny/xlm-roberta",
                                              "generator": "models/tiny/mbart-large-50"}
    assert trained_models("lwtr", config) == {"tagger": "models/tiny/xlm-roberta"}
    assert trained_models("llm", {**config, "llm": {"model": "models/tiny/gpt2"}}) == {
        "tagger": "models/tiny/xlm-roberta", "llm (prompted)": "models/tiny/gpt2"}
    tagger = AutoModel.from_pretrained(tiny_models / "xlm-roberta")
    generator = AutoModelForSeq2SeqLM.from_pretrained(tiny_models / "mbart-large-50")
    assert model_parameters("models/tiny/xlm-roberta") == sum(p.numel() for p in tagger.parameters())
    assert model_parameters("models/tiny/mbart-large-50") == sum(p.numel() for p in generator.parameters())
    assert model_parameters("no/such-model-anywhere") is None
