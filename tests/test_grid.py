"""Grid expansion, slices, sweeps, the Makefile fragment and the failure-recording cell runner."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aclm.experiments.grid import (GRID_DIR, Cell, GridError, conflicts, expand, fragment_path, grid_names, load_grid,
                              makefile, run_cell, with_prerequisites)

CROSS = "test_datasets=[multiconer/hi,multiconer/bn,multiconer/de,multiconer/zh]"


def paths(cells):
    return [str(c.layout.result_path) for c in cells]


def test_every_grid_loads_and_names_its_reference():
    root = GRID_DIR.parent.parent
    for name in grid_names():
        grid = load_grid(name)
        assert (root / grid.reference["file"]).exists(), name
        assert expand(grid, "paper"), name


def test_a_method_the_grid_does_not_name_is_shown_by_its_title_in_the_method_table():
    names = load_grid("mini_table1").method_names
    assert names["gold_only_tuned"] == "Gold-only (tuned)" and names["aclm"] == "ACLM"     # the YAML's own first
    assert load_grid("table1").method_names["gold_only_budget"] == "Gold-only (ACLM's budget)"   # optional too


def test_every_grid_that_scores_a_test_set_names_the_papers():
    for name in grid_names():
        grid = load_grid(name)
        scored = [path for block in grid.blocks for path in block.columns.values()
                  if path != "perplexity" and not path.startswith("augmentation.")]
        assert bool(grid.reference.get("test_set")) == bool(scored), name


@pytest.mark.parametrize("name", ["table10", "table11"])
def test_tables_10_and_11_average_table1s_runs_of_all_ten_languages(name):
    grid = load_grid(name)
    cells = expand(grid, "paper")
    assert grid.average_datasets
    assert {c.dataset.rsplit("/", 1)[-1] for c in cells} == {"en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr",
                                                               "zh"}
    table1 = {str(c.layout.result_path): c.args() for c in expand(load_grid("table1"), "paper", sizes="200,500")}
    assert all(table1[str(c.layout.result_path)] == c.args() for c in cells)     # the same runs, the same commands


def test_table1_slice_gives_exactly_the_expected_cells():
    cells = expand(load_grid("table1"), "paper", langs="en,de", sizes="100", methods="gold_only,aclm", seeds="1 2")
    assert paths(cells) == [
        "runs/paper/multiconer/en/gold100/seed1/s1_eval/result.json",
        "runs/paper/multiconer/en/gold100/seed2/s1_eval/result.json",
        "runs/paper/multiconer/en/gold100/seed1/aclm/s7_eval/result.json",
        "runs/paper/multiconer/en/gold100/seed2/aclm/s7_eval/result.json",
        "runs/paper/multiconer/de/gold100/seed1/s1_eval/result.json",
        "runs/paper/multiconer/de/gold100/seed2/s1_eval/result.json",
        "runs/paper/multiconer/de/gold100/seed1/aclm/s7_eval/result.json",
        "runs/paper/multiconer/de/gold100/seed2/aclm/s7_eval/result.json",
    ]
    en, de = cells[2], cells[6]
    assert en.args() == ["method=aclm", "profile=paper", "dataset=multiconer/en", "gold=100", "seed=1",
                         "run_dir=runs", "storage.keep_final_tagger=false", CROSS]
    assert de.args()[-1] == "storage.keep_final_tagger=false"  # only the en runs carry the cross-lingual test sets


def test_full_table1_size_and_default_seeds():
    cells = expand(load_grid("table1"), "paper")
    assert len(cells) == 10 * 4 * 7 * 3
    assert {c.seed for c in cells} == {1, 2, 3}


def test_a_slice_that_matches_nothing_is_an_error():
    with pytest.raises(GridError, match="LANGS=xx"):
        expand(load_grid("table1"), "paper", langs="en,xx")
    with pytest.raises(GridError, match="METHODS=mulda"):
        expand(load_grid("table1"), "paper", methods="mulda")


def test_sweep_values_run_as_variants_sharing_s1_except_the_profiles_own():
    cells = expand(load_grid("table5"), "paper", sizes="200", seeds="1")
    by_label = {c.sweep: c for c in cells}
    assert len(cells) == 8
    assert by_label["0.3"].variant == "" and by_label["0.3"].args()[-1] == CROSS  # Table 1's run
    assert by_label["0.4"].variant == "keywords.p-0.4"
    assert by_label["0.4"].args()[-2:] == ["variant=keywords.p-0.4", "keywords.p=0.4"]
    assert str(by_label["0"].layout.result_path) == \
        "runs/paper/multiconer/en/gold200/seed1/aclm@keywords.p-0.0/s7_eval/result.json"
    s1 = by_label["0.4"].prerequisites()[0]
    assert s1.layout.result_path == by_label["0.3"].prerequisites()[0].layout.result_path   # one shared S1
    assert "keywords.p=0.4" not in s1.args()
    layers = {c.sweep: c.variant for c in expand(load_grid("table7"), "reference_code", sizes="200", seeds="1")}
    assert layers["last_4"] == "keywords.layers-last4"  # the released code uses 8-11


@pytest.mark.slow
def test_grids_agree_on_shared_runs_and_a_clash_is_found():
    for profile in ("paper", "reference_code", "tiny"):
        assert conflicts(c for name in grid_names() for c in expand(load_grid(name), profile)) == []
    a = Cell("paper", "multiconer/en", 100, "aclm", 1, "runs")
    b = Cell("paper", "multiconer/en", 100, "lwtr", 1, "runs", overrides=("ner.epochs=5",))
    assert len(conflicts([a, b])) == 1  # same S1 target, different command


def test_cell_paths_are_the_run_layout_of_its_config():
    from aclm.base.config import load_config
    from aclm.stages.layout import RunLayout

    for method in ("gold_only", "aclm"):    # run_cell runs them --as-named: their folders as the grid names them
        cell = Cell("tiny", "multiconer/en", 200, method, 3, "some/runs", overrides=("ner.epochs=5",))
        assert cell.layout.result_path == RunLayout.of(load_config(cell.args())).result_path
    assert Cell("tiny", "multiconer/en", 200, "aclm", 3, "r").layout.result_path == Path(
        "r/tiny/multiconer/en/gold200/seed3/aclm/s7_eval/result.json")
    full = Cell("paper", "multiconer/en", "full", "aclm", 1, "runs")
    assert full.layout.root == Path("runs/paper/multiconer/en/goldfull/seed1")


def test_prerequisites_s1_and_aclm_for_wikineural():
    cells = expand(load_grid("table4"), "paper", langs="conll2003/en", sizes="200", methods="wikineural", seeds="1")
    assert [c.method for c in cells] == ["wikineural"]
    needed = with_prerequisites(cells)
    assert [c.method for c in needed] == ["gold_only", "aclm", "wikineural"]


def test_an_optional_method_runs_only_when_methods_names_it_and_brings_what_it_needs():
    grid = load_grid("table1")
    assert not {"gold_only_budget", "gold_only_tuned"} & {c.method for c in expand(grid, "paper")}
    cells = expand(grid, "paper", langs="en", sizes="100", methods="gold_only_budget", seeds="1")
    assert {c.method for c in cells} == {"gold_only_budget"}
    assert [c.method for c in with_prerequisites(cells[:1])] == ["gold_only", "aclm", "gold_only_budget"]
    assert {c.method for c in expand(grid, "paper", langs="en", sizes="100", methods="aclm,gold_only_tuned",
                                     seeds="1")} == {"aclm", "gold_only_tuned"}


def test_the_miniature_runs_the_controls_by_default():
    cells = expand(load_grid("mini_table1"), "mini")
    assert {"gold_only_tuned", "gold_only_budget"} <= {c.method for c in cells}
    assert {(c.method, c.seed) for c in cells if c.gold == 400} == {("gold_only", s) for s in (1, 2, 3)}  # 2 x 200


def rules(text: str) -> dict[str, tuple[str, str]]:
    """target -> (prerequisites, recipe) of a Makefile fragment."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        target, colon, needs = line.partition(":")
        if colon and target.endswith("result.json") and not line.startswith("\t"):
            out[target] = (needs.strip(), lines[i + 1])
    return out


def test_makefile_has_one_target_per_cell_and_the_s1_dependency():
    cells = expand(load_grid("table4"), "paper", langs="conll2003/en", sizes="200",
                   methods="lwtr,aclm,wikineural", seeds="1,2")
    text = makefile(cells, "test", "python")
    found = rules(text)
    s1 = "runs/paper/conll2003/en/gold{0}/seed{1}/s1_eval/result.json"
    assert len(found) == 2 * 4  # 3 methods + their shared S1, per seed
    assert set(paths(cells)) < set(found)
    for seed in (1, 2):   # nothing has run: every target depends on FORCE
        assert found[s1.format(200, seed)][0] == "FORCE"
        lwtr = f"runs/paper/conll2003/en/gold200/seed{seed}/lwtr/s7_eval/result.json"
        assert found[lwtr][0] == "FORCE | " + s1.format(200, seed)
        wiki = found[f"runs/paper/conll2003/en/gold200/seed{seed}/wikineural/s7_eval/result.json"][0]
        assert wiki == (f"FORCE | {s1.format(200, seed)} "
                        f"runs/paper/conll2003/en/gold200/seed{seed}/aclm/s7_eval/result.json")
        assert found[lwtr][1].startswith(f"\t$(PYTHON) scripts/grid.py cell {lwtr} method=lwtr profile=paper")
    all_line = next(line for line in text.splitlines() if line.startswith("all:"))
    assert all_line.split()[1:] == paths(cells)


def test_a_done_run_that_needs_one_about_to_run_runs_again(monkeypatch):
    """WikiNEuRal reads ACLM's result: once ACLM's code changed, one pass of the grid re-runs both."""
    from aclm.experiments.grid import Cell

    cells = expand(load_grid("table4"), "paper", langs="conll2003/en", sizes="200", methods="lwtr,aclm,wikineural",
                   seeds="1")
    monkeypatch.setattr(Cell, "is_done", lambda cell: cell.method != "aclm")
    found = rules(makefile(cells, "test", "python"))
    state = {target.split("/")[-3]: needs.startswith("FORCE") for target, (needs, _) in found.items()}
    assert state == {"seed1": False, "lwtr": False, "aclm": True, "wikineural": True}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_makefile_is_valid_for_make(tmp_path):
    cells = expand(load_grid("table1"), "tiny", runs=str(tmp_path / "runs"), langs="en", sizes="100",
                   methods="gold_only,aclm", seeds="1")
    fragment = tmp_path / "t.mk"
    fragment.write_text(makefile(cells, "test", "python"))
    out = subprocess.run(["make", "-n", "-f", str(fragment), "all"], capture_output=True, text=True, check=True).stdout
    commands = [line for line in out.splitlines() if "scripts/grid.py cell" in line]
    assert len(commands) == 2 and "method=gold_only" in commands[0] and "method=aclm" in commands[1]
    assert "'test_datasets=[multiconer/hi,multiconer/bn,multiconer/de,multiconer/zh]'" in commands[1]


def test_fragment_paths_differ_per_slice():
    plain = fragment_path("runs", "paper", "table1", {"langs": None})
    en = fragment_path("runs", "paper", "table1", {"langs": ["en"]})
    de = fragment_path("runs", "paper", "table1", {"langs": ["de"]})
    assert plain == Path("runs/paper/grids/table1.mk") and len({plain, en, de}) == 3


def fake_python(tmp_path: Path, body: str) -> str:
    """An executable standing in for the interpreter: run_cell calls it as `<it> run_method.py args...`."""
    script = tmp_path / "fakepy"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_run_cell_records_a_failure_and_clears_it_on_success(tmp_path):
    result = tmp_path / "cell" / "s7_ner" / "result.json"
    failing = fake_python(tmp_path, 'echo "progress..." >&2; echo "RuntimeError: CUDA out of memory" >&2; exit 3')
    assert run_cell(result, ["method=aclm"], python=failing) == 3
    failed = json.loads((result.parent / "failed.json").read_text())
    assert failed["error"] == "RuntimeError: CUDA out of memory" and failed["returncode"] == 3
    assert failed["log_tail"] == ["progress...", "RuntimeError: CUDA out of memory"]
    assert not result.exists()

    succeeding = fake_python(tmp_path, f'mkdir -p {result.parent} && echo "{{}}" > {result}')
    assert run_cell(result, ["method=aclm"], python=succeeding) == 0
    assert result.exists() and not (result.parent / "failed.json").exists()


def test_run_cell_fails_when_the_result_is_not_where_the_grid_expects(tmp_path):
    result = tmp_path / "elsewhere" / "result.json"
    assert run_cell(result, [], python=fake_python(tmp_path, "exit 0")) == 1
    assert "wrote no" in json.loads((result.parent / "failed.json").read_text())["error"]


def test_a_stopped_cell_stops_its_run_and_leaves_no_scratch_folder(tmp_path):
    """SIGTERM to the cell wrapper (make, Slurm, kill) reaches the run, whose half-written stage folder goes."""
    cell, ready = tmp_path / "cell", tmp_path / "ready"
    stage = ("import pathlib, time\nfrom aclm.run.cli import main_guard\nfrom aclm.base.io import atomic_dir\n"
             "def main():\n"
             f"    with atomic_dir({str(cell / 's4_generator')!r}) as tmp:\n"
             "        (tmp / 'model.safetensors').write_text('half')\n"
             f"        pathlib.Path({str(ready)!r}).touch()\n"
             "        time.sleep(120)\n"
             "main_guard(main)\n")
    run = fake_python(tmp_path, f'exec {sys.executable} -c "$STAGE"')
    wrapper = ("import sys\nfrom aclm.experiments.grid import run_cell\nfrom aclm.base.signals import Interrupted, "
               "handle_signals\nhandle_signals()\ntry:\n"
               f"    sys.exit(run_cell({str(cell / 's7_eval' / 'result.json')!r}, [], python={run!r}))\n"
               "except Interrupted as stop:\n    sys.exit(stop.exit_code)\n")
    env = {**os.environ, "STAGE": stage, "PYTHONPATH": str(GRID_DIR.parent.parent)}
    proc = subprocess.Popen([sys.executable, "-c", wrapper], env=env)
    for _ in range(1200):
        if ready.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert ready.exists(), "the stage never started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert sorted(p.name for p in cell.iterdir()) == []      # no scratch folder, and no failed.json: it was stopped


def test_list_prints_phases_in_order():
    env = {**os.environ, "PYTHONPATH": str(GRID_DIR.parent.parent)}
    script = str(GRID_DIR.parent.parent / "scripts" / "grid.py")
    args = ["table4", "langs=conll2003/en", "sizes=200", "methods=wikineural", "seeds=1", "--python", "py"]
    phases = [subprocess.run([sys.executable, script, "list", *args, "--phase", str(p)],
                             capture_output=True, text=True, check=True, env=env,
                             cwd=GRID_DIR.parent.parent).stdout.splitlines() for p in (0, 1, 2)]
    assert [len(p) for p in phases] == [1, 1, 1]
    assert "method=gold_only" in phases[0][0] and "method=aclm" in phases[1][0] and "method=wikineural" in phases[2][0]
    assert phases[0][0].startswith("py scripts/grid.py cell runs/paper/conll2003/en/gold200/seed1/s1_eval/result.json")
