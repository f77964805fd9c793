"""Scores agree with conlleval semantics on hand-checked cases."""

import json
import subprocess
import sys

import pytest

from aclm.base.metrics import evaluate_tags


def test_perfect_and_empty_prediction():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    assert evaluate_tags(gold, gold)["f1"] == 100.0
    scores = evaluate_tags(gold, [["O", "O", "O", "O"]])
    assert scores["precision"] == 0.0 and scores["recall"] == 0.0 and scores["f1"] == 0.0


def test_boundary_errors_count_as_wrong():
    # gold: PER(0-2), LOC(3); pred: PER(0-1) wrong boundary, LOC right -> P = 1/2, R = 1/2
    scores = evaluate_tags([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]])
    assert scores["precision"] == pytest.approx(50.0)
    assert scores["recall"] == pytest.approx(50.0)
    assert scores["per_type"]["LOC"]["f1"] == pytest.approx(100.0)
    assert scores["per_type"]["PER"]["f1"] == pytest.approx(0.0)


def test_i_start_opens_an_entity_as_in_conlleval():
    # conlleval reads "O I-PER I-PER" as one PER entity, equal to "O B-PER I-PER"
    scores = evaluate_tags([["O", "B-PER", "I-PER"]], [["O", "I-PER", "I-PER"]])
    assert scores["f1"] == 100.0


def test_adjacent_entities_of_one_type():
    gold = [["B-LOC", "B-LOC", "O"]]                 # two one-word LOCs
    merged = [["B-LOC", "I-LOC", "O"]]               # one two-word LOC: both gold entities missed
    scores = evaluate_tags(gold, merged)
    assert scores["recall"] == 0.0 and scores["precision"] == 0.0
    assert evaluate_tags(gold, gold)["f1"] == 100.0


def test_type_error_counts_as_wrong():
    scores = evaluate_tags([["B-PER", "O"], ["B-ORG", "O"]], [["B-LOC", "O"], ["B-ORG", "O"]])
    assert scores["precision"] == pytest.approx(50.0) and scores["recall"] == pytest.approx(50.0)


def test_length_buckets():
    short = (["B-PER", "O"], ["B-PER", "O"])                                  # 2 words, right
    mid = (["B-PER"] + ["O"] * 6, ["O"] * 7)                                   # 7 words, missed
    long = (["B-LOC"] + ["O"] * 11, ["B-LOC"] + ["O"] * 11)                    # 12 words, right
    scores = evaluate_tags(*zip(short, mid, long))
    assert scores["per_length"]["len_lt5"]["f1"] == 100.0
    assert scores["per_length"]["len_5_10"]["f1"] == 0.0
    assert scores["per_length"]["len_ge10"]["f1"] == 100.0
    assert [b["sentences"] for b in scores["per_length"].values()] == [1, 1, 1]


def test_mismatched_lengths_give_a_clear_error():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        evaluate_tags([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        evaluate_tags([["O"], ["O"]], [["O"]])


@pytest.mark.slow
def test_evaluate_script_on_files(tmp_path):
    gold = tmp_path / "gold.conll"
    pred = tmp_path / "pred.conll"
    gold.write_text("john\tB-PER\nsmith\tI-PER\nin\tO\nrome\tB-LOC\n\n")
    pred.write_text("john\tI-PER\nsmith\tI-PER\nin\tO\nrome\tB-ORG\n\n")
    out = tmp_path / "scores.json"
    proc = subprocess.run([sys.executable, "scripts/evaluate.py", "--gold", str(gold), "--pred", str(pred),
                           "--json", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(out.read_text())[str(pred)]
    assert scores["precision"] == pytest.approx(50.0) and scores["recall"] == pytest.approx(50.0)


@pytest.mark.slow
def test_evaluate_script_rejects_different_tokens(tmp_path):
    gold = tmp_path / "gold.conll"
    pred = tmp_path / "pred.conll"
    gold.write_text("john\tB-PER\n\n")
    pred.write_text("jane\tB-PER\n\n")
    proc = subprocess.run([sys.executable, "scripts/evaluate.py", "--gold", str(gold), "--pred", str(pred)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "tokens differ" in proc.stderr
