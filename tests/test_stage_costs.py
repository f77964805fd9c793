"""tools/stage_costs.py on the tiny models: every stage costed, weights pruned, a rerun does no work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import PRUNING
from conftest import FAST

pytestmark = pytest.mark.slow


def costs(run_dir, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/stage_costs.py", "--json", str(out), *FAST,
                           f"run_dir={run_dir}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)


def test_every_stage_is_costed_and_scaled_to_the_paper(tiny_models, tmp_path):
    first = costs(tmp_path / "runs", tmp_path / "costs.json")
    assert first.returncode == 0, first.stderr[-3000:]
    figures = json.loads((tmp_path / "costs.json").read_text())
    stages = [r["stage"] for r in figures["stages"]]
    assert stages == ["data", "s1_ner", "s2_keywords", "s3_templates", "s4_generator", "s5_generation",
                      "s6_postprocess", "s7_ner", "s7_eval"]
    rows = {r["stage"]: r for r in figures["stages"]}
    assert all(r["peak_rss_mb"] > 0 and r["seconds"] >= 0 for r in rows.values())
    # 2 tagger epochs here, 100 in the paper; 1 generator epoch here, 10 there
    assert rows["s1_ner"]["unit"] == "epoch" and rows["s1_ner"]["paper_seconds"] > 10 * rows["s1_ner"]["seconds"]
    assert rows["s4_generator"]["paper_seconds"] == rows["s4_generator"]["seconds"] * 10
    # the generator's and S7's weights were written, then pruned; S1's stay
    assert rows["s4_generator"]["bytes_kept"] < rows["s4_generator"]["bytes_written"]   # tokenizer files stay
    assert rows["s7_ner"]["bytes_kept"] < rows["s7_ner"]["bytes_written"] / 10
    assert rows["s1_ner"]["bytes_kept"] == rows["s1_ner"]["bytes_written"]
    table1 = figures["table1"]
    assert table1["runs"]["aclm"] == 120 and 0 < table1["low"] < table1["high"]
    assert table1["test_scorings"] == 7 * (12 * 5 + 108)        # en's runs scored on 5 test sets, the rest on 1
    assert "one ACLM pipeline at the paper's epochs" in first.stdout and "s7_eval" in first.stdout

    again = costs(tmp_path / "runs", tmp_path / "again.json")
    assert again.returncode == 0 and "running" not in again.stderr          # nothing re-ran
    assert json.loads((tmp_path / "again.json").read_text())["stages"] == figures["stages"]
    # its folders are the stage scripts' for the same overrides (seed1@ner.epochs=2/): either resumes the other
    script = subprocess.run([sys.executable, "scripts/run_method.py", "method=aclm", *PRUNING, *FAST,
                             f"run_dir={tmp_path / 'runs'}"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=900)
    assert script.returncode == 0 and "running" not in script.stderr, script.stderr[-3000:]
    assert list((tmp_path / "runs").glob("tiny/*/*/gold*/seed1@ner.epochs=2/s1_ner"))
