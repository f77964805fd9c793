"""Aggregation of hand-made result JSONs into a paper table: statistics, gaps, failures, Welch's test."""

import json
import math
import statistics

import pandas as pd
import pytest
from scipy import stats

from aclm.grid import Cell, expand, load_grid
from aclm.report import build_report, entry_text, run_status, write_report

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


def write_result(cell: Cell, en: float, hi: float) -> None:
    cell.result_path.parent.mkdir(parents=True, exist_ok=True)
    cell.result_path.write_text(json.dumps({"method": cell.method, "seed": cell.seed, "f1": en,
                                            "test": {"multiconer/en": {"f1": en}, "multiconer/hi": {"f1": hi}}}))


def write_failed(cell: Cell, error: str) -> None:
    cell.failed_path.parent.mkdir(parents=True, exist_ok=True)
    cell.failed_path.write_text(json.dumps({"error": error, "returncode": 1}))


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
    assert run_status(cell) == ("failed", None, "S1 failed: error: no such file")


def test_table3_reads_diversity_and_computes_perplexity_once(tmp_path, tiny_models):
    from aclm.perplexity import perplexity
    from aclm.report import PerplexityCache

    grid = load_grid("table3")
    cells = expand(grid, "tiny", runs=str(tmp_path / "runs"), sizes="200", methods="aclm", seeds="1,2")
    sentences = {1: ["john lives in paris", "mary went home"], 2: ["the river bank"]}
    for cell in cells:
        write_result(cell, 50.0, 20.0)
        result = json.loads(cell.result_path.read_text())
        diversity = {"diversity_e": 40.0 + cell.seed, "diversity_n": 20.0, "diversity_l": 5.0}
        result["augmentation"] = {"diversity": diversity}
        result["config"] = {"analysis": {"perplexity_model": "models/tiny/gpt2", "batch_size": 4}}
        cell.result_path.write_text(json.dumps(result))
        cell.aug_path.parent.mkdir(parents=True)
        cell.aug_path.write_text("".join("".join(f"{w}\tO\n" for w in s.split()) + "\n" for s in sentences[cell.seed]))
    cache = PerplexityCache(tmp_path / "cache.json", device="cpu")
    report = build_report(grid, cells, "tiny", cache)
    expected = [perplexity(sentences[s], "models/tiny/gpt2", device="cpu") for s in (1, 2)]
    assert entry(report, "200", "aclm", "perplexity")["mean"] == pytest.approx(statistics.mean(expected))
    assert entry(report, "200", "aclm", "perplexity")["paper"] == pytest.approx(80.77)
    assert entry(report, "200", "aclm", "diversity_e")["mean"] == pytest.approx(41.5)
    assert len(json.loads((tmp_path / "cache.json").read_text())) == 2


def test_an_empty_aug_file_has_no_perplexity(tmp_path, monkeypatch):
    # a method that kept no augmentation writes an empty aug.conll: no sentences, not an error
    from aclm import perplexity as module
    from aclm.report import PerplexityCache

    seen = []
    monkeypatch.setattr(module, "perplexity", lambda texts, *a, **k: seen.append(texts))
    cell = Cell("tiny", "multiconer/en", 100, "aclm", 1, str(tmp_path))
    cell.aug_path.parent.mkdir(parents=True)
    cell.aug_path.write_text("")
    result = {"config": {"analysis": {"perplexity_model": "models/tiny/gpt2", "batch_size": 4}}}
    assert PerplexityCache(tmp_path / "cache.json")(cell, result) is None
    assert seen == [[]]


def test_sweep_points_are_rows_of_their_own(tmp_path):
    grid = load_grid("melm_table2")
    cells = expand(grid, "tiny", runs=str(tmp_path / "runs"), sizes="100", seeds="1,2")
    assert {(c.method, c.variant) for c in cells} == {("gold_only", ""), ("mulda", ""), ("melm", ""),
                                                      ("melm", "melm.code_mix-true")}
    for cell in cells:
        score = {"gold_only": 70.0, "mulda": 72.0, "melm": 80.0 if cell.variant else 75.0}[cell.method] + cell.seed
        cell.result_path.parent.mkdir(parents=True, exist_ok=True)
        cell.result_path.write_text(json.dumps({"test": {d: {"f1": score} for d in (
            "conll2003/en", "conll2003/de", "conll2002/es", "conll2002/nl")}}))
    report = build_report(grid, cells, "tiny")
    rows = {line.split("|")[2].strip(): line for line in report.markdown.splitlines() if line.startswith("| 100")}
    assert "81.50 ± 0.71 (80.96" in rows["MELM"] and "76.50 ± 0.71 (78.71" in rows["MELM-gold"]
    assert "MELM-gold" in rows["p: MELM vs best baseline"]   # the best baseline is MELM without code-mixing


def test_the_report_says_which_mixner_sigma_and_generator_the_runs_used(tmp_path):
    (tmp_path / "ref.csv").write_text(REFERENCE)
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "toy.yaml").write_text(GRID.format(reference=tmp_path / "ref.csv"))
    grid = load_grid("toy", tmp_path / "grids")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"), sizes="100", seeds="1")
    for cell in cells:
        write_result(cell, 50.0, 40.0)
        result = json.loads(cell.result_path.read_text())
        result["config"] = {"generation": {"mixner": {"mode": "paper", "beta": 0.7, "gamma_sigma": 0.3,
                                                      "code_mixed_rounds": 2}},
                            "generator": {"model": "models/tiny/mbart-large-50"}}
        cell.result_path.write_text(json.dumps(result))
    markdown = build_report(grid, cells, "paper").markdown
    assert "sigma = 0.3" in markdown and "not given in the paper" in markdown
    assert "models/tiny/mbart-large-50 (random weights" in markdown
