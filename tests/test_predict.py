"""Use what you trained: `make run` keeps its S7 tagger, and scripts/predict.py tags a file with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aclm.base.data import read_conll
from aclm.base.io import read_json
from aclm.base.paths import PROJECT_ROOT
from aclm.stages.layout import MODEL, RESULT, RunLayout
from aclm.run.naming import run_config

pytestmark = pytest.mark.real_weights


#: the real mini encoder, trained briefly (10 epochs): enough for predictions that are not all O
SETTING = ["ner.epochs=10", "generation.rounds=1"]


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory, shared_data) -> RunLayout:
    runs = tmp_path_factory.mktemp("predict") / "runs"
    args = " ".join([f"run_dir={runs}", *SETTING])
    env = {**os.environ, "ACLM_DATA_DIR": str(shared_data)}
    subprocess.run(["make", "run", "METHOD=lwtr", "PROFILE=mini", "DATASET=multiconer/en", "GOLD=100",
                    f"ARGS={args}"], cwd=PROJECT_ROOT, env=env, check=True, capture_output=True)
    return RunLayout.of(run_config(["profile=mini", "method=lwtr", "dataset=multiconer/en", "gold=100",
                                    f"run_dir={runs}", *SETTING]))


def test_make_run_keeps_its_s7_tagger_and_predict_scores_as_s7_eval(kept_run, shared_data, tmp_path):
    s7 = kept_run.stage("s7_ner")
    assert (s7 / MODEL).is_file(), "a single `make run` keeps the tagger it was run for"
    test = shared_data / "multiconer" / "en" / "test.conll"
    out = tmp_path / "tagged.conll"
    subprocess.run([sys.executable, "scripts/predict.py", "--model", str(s7), "--input", str(test),
                    "--output", str(out)], cwd=PROJECT_ROOT, check=True, capture_output=True)
    tagged = read_conll(out)
    scored = [line.split("\t") for line in (kept_run.stage("s7_eval") / "predictions" / "multiconer_en.conll")
              .read_text(encoding="utf-8").splitlines() if line]
    assert [t for s in tagged for t in s.tags] == [cols[2] for cols in scored]
    assert any(t != "O" for s in tagged for t in s.tags), "the check means little on all-O output"

    scores = tmp_path / "scores.json"
    subprocess.run([sys.executable, "scripts/evaluate.py", "--gold", str(test), "--pred", str(out),
                    "--json", str(scores)], cwd=PROJECT_ROOT, check=True, capture_output=True)
    f1 = next(iter(json.loads(scores.read_text()).values()))["f1"]
    assert f1 == pytest.approx(read_json(kept_run.stage("s7_eval") / RESULT)["f1"], abs=1e-9)


def test_predict_reads_plain_text_and_says_when_a_tagger_was_pruned(kept_run, tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("the new album was released by columbia records .\n\nshe lives in paris\n", encoding="utf-8")
    out = tmp_path / "tagged.conll"
    subprocess.run([sys.executable, "scripts/predict.py", "--model", str(kept_run.method_dir), "--input",
                    str(text), "--output", str(out)], cwd=PROJECT_ROOT, check=True, capture_output=True)
    assert [s.tokens for s in read_conll(out)] == [text.read_text().split("\n")[0].split(), "she lives in paris".split()]

    gone = tmp_path / "s7_ner"
    gone.mkdir()
    (gone / "_pruned.json").write_text(json.dumps({MODEL: 123}))
    proc = subprocess.run([sys.executable, "scripts/predict.py", "--model", str(gone), "--input", str(text),
                           "--output", str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "was pruned" in proc.stderr
