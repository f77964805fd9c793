"""A table's artifacts exported in one folder: each cell's files copied, an index `datasets` loads, a card."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import load_grid, selected_cells, selection
from aclm.stages import layout

SLICE = ["profile=tiny", "langs=en", "sizes=100", "seeds=1", "methods=gold_only,lwtr,daga"]


def fake_runs(run_dir) -> None:
    """Gold-only and LwTR finished (files as their stages write them), DAGA failed."""
    cells = {c.method: c for c in selected_cells(load_grid("table1"), selection([*SLICE, f"run_dir={run_dir}"]))}
    for cell in cells.values():
        data = cell.layout.stage(layout.DATA)
        data.mkdir(parents=True, exist_ok=True)
        (data / "train.conll").write_text("john\tB-PER\nran\tO\n\n")
        (data / "dev.conll").write_text("mary\tB-PER\n\n")
    for method, f1 in (("gold_only", 21.5), ("lwtr", 24.0)):
        scores = cells[method].layout.result_path.parent
        (scores / layout.PREDICTIONS).mkdir(parents=True)
        (scores / layout.PREDICTIONS / "multiconer_en.conll").write_text("paris\tB-LOC\tB-LOC\n\n")
        (scores / layout.RESULT).write_text(json.dumps({"f1": f1, "checkout": {"commit": "abc123", "dirty": False},
                                                         "sizes": {"test:multiconer/en": 1}}))
    s7 = cells["lwtr"].layout.stage(layout.S7)        # the tagger's stamp: the machine and command it trained with
    s7.mkdir(parents=True)
    (s7 / "_stage.json").write_text(json.dumps({"checkout": {
        "commit": "abc123", "command": "python scripts/run_method.py method=lwtr seed=1",
        "hardware": {"cpu": "Some CPU 9000", "cores": 2, "gpu": None, "system": "Linux"}}}))
    result = cells["lwtr"].layout.result_path
    result.write_text(json.dumps({**json.loads(result.read_text()), "dev_f1": 31.25,
                                  "training": {"epochs_trained": 7, "max_epochs": 100, "stop_reason": "annealed"},
                                  "config": {"ner": {"model": "models/tiny/xlm-roberta"}}}))
    s6 = cells["lwtr"].layout.stage(layout.S6)
    s6.mkdir(parents=True)
    (s6 / layout.AUG).write_text("joan\tB-PER\nran\tO\n\n")
    (s6 / layout.GOLD_AUG).write_text("john\tB-PER\nran\tO\n\njoan\tB-PER\nran\tO\n\n")
    (s6 / layout.REPORT).write_text(json.dumps({"added": 1}))
    cells["daga"].layout.failed_path.parent.mkdir(parents=True)
    cells["daga"].layout.failed_path.write_text(json.dumps({"error": "error: out of memory"}))


def test_export_copies_each_cell_and_writes_an_index_datasets_loads(tmp_path):
    import datasets

    fake_runs(tmp_path / "runs")
    done = subprocess.run([sys.executable, "scripts/export_table.py", "table1", *SLICE, f"run_dir={tmp_path / 'runs'}",
                           "--out", str(tmp_path / "exports"), "--tar"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    root = tmp_path / "exports" / "tiny" / "table1"
    index = datasets.load_dataset("json", data_files=str(root / "index.jsonl"), split="train")
    rows = {row["method"]: row for row in index}
    assert set(rows) == {"gold_only", "lwtr", "daga"}
    assert (rows["lwtr"]["status"], rows["lwtr"]["f1"], rows["gold_only"]["f1"]) == ("ok", 24.0, 21.5)
    assert rows["daga"]["status"] == "failed" and rows["daga"]["error"] == "error: out of memory"
    assert (root / rows["lwtr"]["train"]).read_text().count("\n\n") == 2          # gold + 1 augmentation
    assert (root / rows["lwtr"]["augmentations"]).read_text() == "joan\tB-PER\nran\tO\n\n"
    assert rows["gold_only"]["train"] == rows["gold_only"]["gold_train"] and rows["gold_only"]["augmentations"] is None
    assert (root / rows["gold_only"]["predictions"][0]).read_text() == "paris\tB-LOC\tB-LOC\n\n"
    card = (root / "README.md").read_text()
    assert "Profile `tiny`; 2 of 3 cells ran" in card and "`abc123`" in card and "daga on multiconer/en" in card
    assert "Paper: the official MultiCoNER v1 test sets" in card                  # which test set each side used
    model_card = (root / rows["lwtr"]["folder"] / "MODEL_CARD.md").read_text()
    assert "`python scripts/run_method.py method=lwtr seed=1`" in model_card and "Some CPU 9000, 2 cores" in model_card
    assert "test 24.00 on multiconer/en, dev 31.25" in model_card and "7 of 100 epochs (annealed)" in model_card
    assert "Hardware:** not recorded" in (root / rows["gold_only"]["folder"] / "MODEL_CARD.md").read_text()
    with tarfile.open(tmp_path / "exports" / "tiny" / "table1.tar.gz") as packed:
        assert "table1/index.jsonl" in packed.getnames()


def test_a_stale_result_is_exported_as_missing_as_its_table_reads_it(tmp_path):
    from aclm.tables.export_table import export_table

    fake_runs(tmp_path / "runs")
    grid = load_grid("table1")
    cells = selected_cells(grid, selection([*SLICE, f"run_dir={tmp_path / 'runs'}"]))
    gold_only = next(c for c in cells if c.method == "gold_only")
    (gold_only.layout.result_path.parent / "_stage.json").write_text(json.dumps({"fingerprint": "made by other code"}))
    root = export_table(grid, cells, "tiny", tmp_path / "exports")
    rows = {json.loads(line)["method"]: json.loads(line) for line in (root / "index.jsonl").read_text().splitlines()}
    assert rows["gold_only"]["status"] == "missing" and "is stale" in rows["gold_only"]["error"]
    assert rows["gold_only"]["f1"] is None and rows["lwtr"]["status"] == "ok"
    assert "1 of 3 cells ran" in (root / "README.md").read_text()
