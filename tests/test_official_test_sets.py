"""``test_set=official``: a MultiCoNER grid run on the official MultiCoNER v1 release, and its table saying so.

The release is not in the data folder, so the test builds a few sentences of it, in the release's layout, in a
data folder of its own, beside the released gold sample the official entries train on.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import (Cell, GridError, expand, fragment_path, load_grid, require_test_set_data,
                                   selected_cells, selection, with_test_set)
from aclm.tables import aggregate   # not its test_sets by name: pytest would collect it
from aclm.tables.runs import of_cell

ONE_CELL = ["langs=en", "sizes=100", "methods=gold_only", "seeds=1", "profile=tiny"]
OFFICIAL_CROSS = ("test_datasets=[multiconer_official/hi,multiconer_official/bn,multiconer_official/de,"
                  "multiconer_official/zh]")

# en runs scored on en and (as Table 1's en runs are) on another language: one cell, one epoch
GRID = """
title: "Official test sets, one cell"
reference: {file: reference/aclm_table1_mono_cross.csv,
            test_set: "the official MultiCoNER v1 test sets (130k-220k sentences a language)"}
seeds: [1]
method_names: {gold_only: Gold-only}
index: {gold: "{gold}", method: "{method_name}"}
blocks:
  - datasets: [multiconer/en]
    sizes: [100]
    methods: [gold_only]
    overrides: {ner.epochs: 1, test_datasets: [multiconer/hi]}
    columns: {en: f1, en_hi: test.multiconer/hi.f1}
"""

PEOPLE = ["anna berg", "tomas weller", "li na", "maria costa", "jon ek", "sara holm"]
PLACES = ["oslo", "porto alegre", "lima", "new delhi", "kyoto", "nairobi"]


def sentences(n: int, offset: int = 0) -> list[list[tuple[str, str]]]:
    """``n`` tagged sentences, each with a PER and a LOC (enough of both for the data check's rare-type rule)."""
    out = []
    for i in range(offset, offset + n):
        person, place = PEOPLE[i % len(PEOPLE)].split(), PLACES[(i * 5) % len(PLACES)].split()
        tags = ["B-PER"] + ["I-PER"] * (len(person) - 1) + ["O", "O"] + ["B-LOC"] + ["I-LOC"] * (len(place) - 1)
        out.append(list(zip([*person, "lives", "in", *place], tags)))
    return out


def write_release(path: Path, lang: str, data: list[list[tuple[str, str]]]) -> None:
    """The release's layout: a ``# id`` line per sentence, then ``token _ _ TAG`` lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"# id {lang}-{k}\tdomain={lang}\n" + "".join(f"{w} _ _ {t}\n" for w, t in s) + "\n"
                            for k, s in enumerate(data)), encoding="utf-8")


@pytest.fixture
def official_data(tmp_path) -> Path:
    """A data folder with the official en files, the hi test file, and en's released 100-sentence sample."""
    data = tmp_path / "data"
    for split, n, offset in (("train", 30, 0), ("dev", 6, 30), ("test", 8, 40)):
        write_release(data / "multiconer_official" / "EN-English" / f"en_{split}.conll", "en", sentences(n, offset))
    write_release(data / "multiconer_official" / "HI-Hindi" / "hi_test.conll", "hi", sentences(5, 50))
    sample = data / "multiconer" / "en" / "train_100.conll"       # the data folder's format: word TAB tag
    sample.parent.mkdir(parents=True)
    sample.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in sentences(12)), encoding="utf-8")
    return data


def test_official_maps_every_multiconer_dataset_of_the_grid():
    grid = load_grid("table1")
    slice_cells = expand(grid, "paper", langs="en,de", sizes="100", methods="gold_only,aclm", seeds="1")
    for words in ([], ["test_set=slice"]):     # the default: the same cells, commands and run folders as before
        chosen = selection(["langs=en,de", "sizes=100", "methods=gold_only,aclm", "seeds=1", *words])
        assert selected_cells(grid, chosen) == slice_cells

    chosen = selection(["langs=en,de", "sizes=100", "methods=gold_only,aclm", "seeds=1", "test_set=official"])
    cells = selected_cells(grid, chosen)
    assert [c.dataset for c in cells] == ["multiconer_official/en"] * 2 + ["multiconer_official/de"] * 2
    assert cells[0].args()[-1] == OFFICIAL_CROSS                       # the block's test_datasets too
    assert str(cells[1].layout.result_path) == "runs/paper/multiconer_official/en/gold100/seed1/aclm/s7_eval/result.json"
    assert not {c.layout.result_path for c in cells} & {c.layout.result_path for c in slice_cells}
    official = with_test_set(grid, "official")
    assert official.blocks[0].columns["en_hi"] == "test.multiconer_official/hi.f1"   # read as the runs key it
    assert with_test_set(official, "official") == official
    union = with_test_set(load_grid("table2"), "official").blocks[0]
    assert union.datasets == ("multiconer_official/multi",) and union.columns["zh"] == "test.multiconer_official/zh.f1"


def test_official_is_refused_where_it_means_nothing():
    with pytest.raises(GridError, match="grid table4 runs no dataset that has it"):
        selected_cells(load_grid("table4"), selection(["test_set=official"]))
    assert with_test_set(load_grid("table4"), "official") == load_grid("table4")      # nothing to rename
    with pytest.raises(GridError, match="expected one of slice, official"):
        selected_cells(load_grid("table1"), selection(["test_set=offical"]))


def line_for(cell: Cell) -> str:
    return aggregate.test_sets("P", [of_cell(cell)])


def test_the_test_set_line_says_what_the_runs_recorded(tmp_path):
    slice_cell = Cell("paper", "multiconer/en", 100, "gold_only", 1, str(tmp_path))
    official = Cell("paper", "multiconer_official/en", 100, "gold_only", 1, str(tmp_path))
    held_out = "Ours are the held-out 2,000-sentence slices of the MultiCoNER v1 train sets (multiconer/<lang>), " \
               "not the official test sets."
    assert line_for(slice_cell).endswith(f"(multiconer/en/test.conll, no run scored yet). {held_out}")
    ours = "Ours are the official MultiCoNER v1 test sets (multiconer_official/<lang>)."
    assert line_for(official).endswith(ours)
    # what a run recorded wins over what its cell was asked for (a result.json copied in from elsewhere)
    slice_cell.layout.result_path.parent.mkdir(parents=True)
    slice_cell.layout.result_path.write_text(json.dumps({"sizes": {"test:multiconer_official/en": 217818}}))
    line = line_for(slice_cell)
    assert "multiconer_official/en (multiconer_official/EN-English/en_test.conll, 217818 sentences)" in line
    assert line.endswith(ours)
    assert "Ours are" not in line_for(Cell("paper", "conll2003/en", 200, "gold_only", 1, str(tmp_path)))


def test_missing_release_files_stop_the_grid_before_any_run(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "multiconer" / "en").mkdir(parents=True)
    (data / "multiconer" / "en" / "train_100.conll").write_text("anna\tB-PER\n\n")
    monkeypatch.setenv("ACLM_DATA_DIR", str(data))
    cells = selected_cells(load_grid("table1"), selection([*ONE_CELL, "test_set=official"]))
    with pytest.raises(GridError) as err:
        require_test_set_data(cells, "official")
    message = str(err.value)
    assert message.startswith(f"test_set=official: {data}/multiconer_official/EN-English/en_dev.conll: missing")
    assert f"under {data}/multiconer_official/" in message and "registry.opendata.aws/multiconer" in message
    assert "\n" not in message and "(and 5 more files missing)" in message   # en test, hi bn de zh tests
    require_test_set_data(cells, None)                                        # the slice's grids go on as before

    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "scripts/grid.py", "list", "table1", *ONE_CELL, f"run_dir={runs}",
                           "test_set=official"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env={**os.environ, "ACLM_DATA_DIR": str(data)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"error: {message}"]
    assert not runs.exists()


@pytest.mark.slow
def test_a_cell_on_the_official_layout_runs_and_its_table_names_the_official_test_sets(
        official_data, tmp_path, tiny_models):
    (tmp_path / "official.yaml").write_text(GRID)
    grid, runs, results = str(tmp_path / "official.yaml"), tmp_path / "runs", tmp_path / "results"
    env = {**os.environ, "ACLM_DATA_DIR": str(official_data), "OMP_NUM_THREADS": "1"}
    words = ["profile=tiny", f"run_dir={runs}", "test_set=official"]

    def script(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc.stdout

    fragment = Path(script("scripts/grid.py", "makefile", grid, *words).strip())
    assert fragment != fragment_path(str(runs), "tiny", "official", {})    # not the slice's fragment
    [command] = script("scripts/grid.py", "list", grid, *words).splitlines()
    assert "dataset=multiconer_official/en" in command and "test_datasets=[multiconer_official/hi]" in command
    script(*shlex.split(command)[1:])                                       # the cell, as make would run it
    # its released sample is made up here, not the published file: the runs go to a dataset folder of their own
    [result] = (runs / "tiny" / "multiconer_official").glob("en+data-*/gold100/seed1/s1_eval/result.json")

    table = script("scripts/aggregate.py", grid, *words, "--out", str(results))
    line = next(x for x in table.splitlines() if x.startswith("Test sets."))
    assert line == ("Test sets. Paper: the official MultiCoNER v1 test sets (130k-220k sentences a language). "
                    "Ours: multiconer_official/en (multiconer_official/EN-English/en_test.conll, 8 sentences); "
                    "multiconer_official/hi (multiconer_official/HI-Hindi/hi_test.conll, 5 sentences). "
                    "Ours are the official MultiCoNER v1 test sets (multiconer_official/<lang>).")
    row = next(x for x in table.splitlines() if x.startswith("| 100 | Gold-only"))
    assert row.count("(29.36") == 1 and row.count("(16.36") == 1 and "—" not in row   # en and en->hi both scored
    csv = pd.read_csv(results / "tiny" / "official.csv")
    assert set(csv["test_sets"]) == {line}
    assert "Ours are the official MultiCoNER v1 test sets" in (results / "tiny" / "official.tex").read_text()
