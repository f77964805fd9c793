"""``rounds_on_dev=``: every augmentation method runs at each R, and a table shows, per seed, the R with the best
dev F1 (aclm/experiments/grid.py ``with_rounds_on_dev``, aclm/tables/aggregate.py ``chosen_on_dev``)."""

import json
import subprocess

import pytest

from aclm.experiments.grid import GridError, expand, load_grid, makefile, with_rounds_on_dev
from aclm.tables.aggregate import build_report

GRID = """
title: "Toy table"
reference: {file: REFERENCE}
seeds: [1, 2]
method_names: {gold_only: Gold-only, lwtr: LwTR, aclm: ACLM}
index: {gold: "{gold}", method: "{method_name}"}
blocks:
  - datasets: [multiconer/en]
    sizes: [100]
    methods: [gold_only, lwtr, aclm]
    columns: {en: f1}
"""

# (method, R, seed) -> (dev F1, test F1); the paper profile's R is 5, so R=5 is each method's plain run.
SCORES = {
    ("gold_only", None, 1): (20, 10), ("gold_only", None, 2): (22, 12),
    ("aclm", 1, 1): (40, 30), ("aclm", 5, 1): (35, 50),      # seed 1: R=1 leads on dev, not on test
    ("aclm", 1, 2): (30, 20), ("aclm", 5, 2): (45, 42),
    ("lwtr", 1, 1): (50, 25), ("lwtr", 5, 1): (50, 27),      # a tie: the first R in sweep order
    ("lwtr", 5, 2): (33, 23),                                 # R=1 of seed 2 failed
}


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "ref.csv").write_text("gold,method,en\n")                 # no paper numbers: (—) beside ours
    (tmp_path / "toy.yaml").write_text(GRID.replace("REFERENCE", str(tmp_path / "ref.csv")))
    return load_grid("toy", tmp_path)


def test_each_augmentation_method_is_swept_over_r_and_gold_only_is_not(toy, tmp_path):
    grid = with_rounds_on_dev(toy, "1,5")
    assert [(b.methods, b.sweep_key, b.choose) for b in grid.blocks] == [
        (("gold_only",), None, None), (("lwtr", "aclm"), "generation.rounds", "dev")]
    assert with_rounds_on_dev(grid, "1,5") == grid and with_rounds_on_dev(toy, None) == toy
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"), seeds="1")
    assert [(c.method, c.sweep, c.variant, c.variant_overrides) for c in cells] == [
        ("gold_only", None, "", ()),
        ("lwtr", "R=1", "generation.rounds-1", ("generation.rounds=1",)), ("lwtr", "R=5", "", ()),
        ("aclm", "R=1", "generation.rounds-1", ("generation.rounds=1",)), ("aclm", "R=5", "", ())]
    fragment = tmp_path / "toy.mk"                      # a sweep point's folder (aclm@...) is a make target
    fragment.write_text(makefile(cells, "toy", "python"))
    planned = subprocess.run(["make", "-n", "-f", str(fragment), "all"], capture_output=True, text=True, check=True)
    assert "aclm@generation.rounds-1/s7_eval/result.json method=aclm" in planned.stdout


def test_the_table_shows_per_seed_the_r_with_the_best_dev_f1(toy, tmp_path):
    grid = with_rounds_on_dev(toy, "1,5")
    cells = expand(grid, "paper", runs=str(tmp_path / "runs"))
    for cell in cells:
        rounds = int(cell.sweep[2:]) if cell.sweep else None
        scores = SCORES.get((cell.method, rounds, cell.seed))
        if scores is None:
            cell.layout.failed_path.parent.mkdir(parents=True, exist_ok=True)
            cell.layout.failed_path.write_text(json.dumps({"error": "RuntimeError: out of memory"}))
            continue
        cell.layout.result_path.parent.mkdir(parents=True, exist_ok=True)
        cell.layout.result_path.write_text(json.dumps({"method": cell.method, "seed": cell.seed, "f1": scores[1],
                                                       "dev_f1": scores[0]}))
    report = build_report(grid, cells, "paper")
    wide = report.table.set_index(["gold", "method"])
    assert list(wide.index) == [("100", "Gold-only"), ("100", "LwTR"), ("100", "ACLM")]     # one row a method
    assert wide.loc[("100", "ACLM"), "en"] == "36.00 ± 8.49 (—)"     # seed 1 at R=1 (30), seed 2 at R=5 (42)
    assert wide.loc[("100", "ACLM"), "en (dev)"] == "42.50 ± 3.54"   # the dev F1s that chose them: 40, 45
    assert wide.loc[("100", "LwTR"), "en"] == "24.00 ± 1.41 (—)"     # the tie's first R (25), the R that ran (23)
    assert ("Chosen on dev (generation.rounds), multiconer/en gold 100, ACLM: R=1 (seed 1), R=5 (seed 2); "
            "dev F1 a point: R=1 35.00, R=5 40.00.") in report.markdown
    assert "LwTR: R=1 (seed 1), R=5 (seed 2); dev F1 a point: R=1 50.00, R=5 41.50." in report.markdown


def test_choose_needs_a_sweep(toy, tmp_path):
    unswept = GRID.replace("REFERENCE", "ref.csv").replace("columns: {en: f1}", "columns: {en: f1}\n    choose: dev")
    (tmp_path / "bad.yaml").write_text(unswept)
    with pytest.raises(GridError, match="choose: 'dev': give choose: dev, with a sweep"):
        load_grid("bad", tmp_path)
