"""The data check: bad data is caught before any training, with the file and line at fault."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest


from aclm.base.config import load_config
from aclm.base.data import DataError, read_conll
from aclm.base.paths import PROJECT_ROOT
from aclm.run.datacheck import check_setting, preflight

SAMPLE = PROJECT_ROOT / "data" / "sample" / "en"


@pytest.fixture
def folder(tmp_path) -> Path:
    """A dataset folder of the user's own: the bundled English sample's three files."""
    out = tmp_path / "my_data"
    shutil.copytree(SAMPLE, out)
    return out


def check(folder: Path, *overrides: str):
    return check_setting(load_config(["profile=tiny", f"dataset={folder}", *overrides]))


def edit_line(path: Path, lineno: int, new: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[lineno - 1] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def first_tagged_line(path: Path, prefix: str = "B-") -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if f"\t{prefix}" in line)


def test_the_bundled_sample_passes(folder):
    report = check(folder)
    assert report.errors == [] and report.warnings == []
    assert sum(report.files.values()) == 110


def test_a_folder_without_a_test_file_fails_before_any_training(folder, tiny_models, tmp_path):
    (folder / "test.conll").unlink()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "scripts/run_method.py", "method=aclm", "profile=tiny",
                           f"dataset={folder}", f"run_dir={tmp_path / 'runs'}"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "no test file" in proc.stderr and "test.conll" in proc.stderr
    assert not list((tmp_path / "runs").rglob("s1_ner")), "nothing may train before the data check"
    print(f"failed in {seconds:.1f} s")   # the process start and imports included
    assert seconds < 120


def test_a_misspelt_type_fails_with_its_file_and_line(folder):
    train = folder / "train.conll"
    n = first_tagged_line(train)
    word = train.read_text().splitlines()[n - 1].split("\t")[0]
    edit_line(train, n, f"{word}\tB-PRE")
    errors = check(folder).errors
    assert any(f"{train}:" in e and "'PRE'" in e and "only 1 sentence" in e for e in errors), errors


def test_an_undeclared_type_fails_where_the_dataset_declares_its_types(shared_data):
    from aclm.run.datacheck import undeclared_types

    cfg = load_config(["profile=mini", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}"])
    train = shared_data / "multiconer" / "en" / "train_100.conll"
    sentences = read_conll(train)
    start = int(sentences[5].meta["source"].rsplit(":", 1)[1])
    sentences[5].tags[2] = "B-PRE"
    assert undeclared_types({"multiconer/en train": sentences}) == [
        f"{train}:{start + 2}: entity type 'PRE' is not one of multiconer/en's types (CORP, CW, GRP, LOC, PER, PROD)"]
    assert check_setting(cfg).errors == []


@pytest.mark.slow
def test_each_member_of_a_union_dataset_is_held_to_its_declared_types(shared_data, tmp_path):
    data = tmp_path / "data"
    for language in (shared_data / "multiconer").iterdir():
        (data / "multiconer" / language.name).mkdir(parents=True)
        for file in language.glob("*.conll"):
            (data / "multiconer" / language.name / file.name).symlink_to(file)
    cfg = load_config(["profile=mini", "dataset=multiconer/multi", "gold=100", f"data_dir={data}"])
    assert check_setting(cfg).errors == []
    train = data / "multiconer" / "de" / "train_100.conll"
    text = train.read_text(encoding="utf-8")
    train.unlink()
    train.write_text(text, encoding="utf-8")
    n = first_tagged_line(train)
    word = train.read_text().splitlines()[n - 1].split("\t")[0]
    edit_line(train, n, f"{word}\tB-PRE")
    assert (f"{train}:{n}: entity type 'PRE' is not one of multiconer/de's types (CORP, CW, GRP, LOC, PER, PROD)"
            in check_setting(cfg).errors)


def rename_type(path: Path, old: str, new: str) -> None:
    """Rename entity type ``old`` to ``new`` throughout ``path``."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(f"B-{old}\n", f"B-{new}\n").replace(f"I-{old}\n", f"I-{new}\n"), encoding="utf-8")


def test_a_type_only_the_test_set_has_fails_before_training(folder, tmp_path):
    test = folder / "test.conll"
    rename_type(test, "CW", "WORK")             # first at line 11, in the sentence that starts at line 9
    assert check(folder).errors == [f"{test}:11: test set {str(folder)!r} has entity type(s) ['WORK'] that the "
                                    f"training data does not (CORP, CW, GRP, LOC, PER, PROD); the tagger could "
                                    f"never predict them"]

    other = tmp_path / "other"                  # every test set the run is scored on is checked
    shutil.copytree(folder, other)
    shutil.copy(SAMPLE / "test.conll", test)
    assert check(folder).errors == []
    errors = check(folder, f"test_datasets=[{other}]").errors
    assert len(errors) == 1 and errors[0].startswith(f"{other / 'test.conll'}:11: test set {str(other)!r} "), errors


def test_lower_case_tags_fail_unless_accepted(folder):
    train = folder / "train.conll"
    n = first_tagged_line(train)
    word, tag = train.read_text().splitlines()[n - 1].split("\t")
    edit_line(train, n, f"{word}\t{tag.lower()}")
    errors = check(folder).errors
    assert any(f"{train}:{n}:" in e and repr(tag.lower()) in e for e in errors), errors
    assert check(folder, "data_check.canonical_tags=false").errors == []


@pytest.mark.parametrize("canonical", ["true", "false"])
def test_types_differing_only_in_case_fail_in_any_case_mode(folder, canonical):
    train = folder / "train.conll"
    for n in (134, 135, 159, 160, 222, 223):      # PER in the sentences at lines 134, 152 and 222; at 1 it stays
        word, tag = train.read_text().splitlines()[n - 1].split("\t")
        edit_line(train, n, f"{word}\t{tag[:2]}Per")
    assert check(folder, f"data_check.canonical_tags={canonical}").errors == [
        f"{train}:134: entity type 'Per' differs from 'PER' ({train}:1) only in case, and both would be the "
        f"label token <b-per>; spell them alike"]


def test_iob1_openings_are_read_as_b_with_a_warning(folder):
    train = folder / "train.conll"
    n = first_tagged_line(train)
    word, tag = train.read_text().splitlines()[n - 1].split("\t")
    edit_line(train, n, f"{word}\tI-{tag[2:]}")
    report = check(folder)
    assert report.errors == [] and any("IOB1" in w for w in report.warnings)


def test_a_sentence_longer_than_the_encoder_is_counted(folder, capfd):
    from aclm.run.datacheck import load_tokenizer

    load_tokenizer.cache_clear()                    # transformers warns once per tokenizer: a fresh one
    train = folder / "train.conll"
    with train.open("a", encoding="utf-8") as f:
        f.write("".join(f"word{i}\tO\n" for i in range(2000)) + "\n")
    warnings = check(folder).warnings
    assert any(w.startswith("1 sentence(s) are longer than the encoder's") and "2000 words" in w for w in warnings)
    assert "Token indices sequence length" not in capfd.readouterr().err      # counted once, by the check alone


def test_an_unbuilt_model_folder_names_its_make_target(folder):
    report = check(folder, "ner.model=models/tiny/not-built")
    assert any("make tiny-models" in e for e in report.errors), report.errors
    with pytest.raises(DataError, match="make tiny-models"):
        preflight(load_config(["profile=tiny", f"dataset={folder}", "ner.model=models/tiny/not-built"]))


def evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/evaluate.py", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True)


@pytest.mark.slow
def test_evaluate_checks_tags_and_prints_precision_recall_support(folder, tmp_path):
    gold = folder / "test.conll"
    pred = tmp_path / "pred.conll"
    shutil.copy(gold, pred)
    ok = evaluate("--gold", str(gold), "--pred", str(pred))
    assert ok.returncode == 0, ok.stderr
    assert " P 100.00  R 100.00  F1 100.00  (support" in ok.stdout

    n = first_tagged_line(pred)
    word, tag = pred.read_text().splitlines()[n - 1].split("\t")
    edit_line(pred, n, f"{word}\tB-MADEUP")
    warned = evaluate("--gold", str(gold), "--pred", str(pred))
    assert warned.returncode == 0 and f"{pred}:{n}: predicted type 'MADEUP' does not occur" in warned.stdout

    edit_line(gold, n, f"{word}\t{tag.lower()}")
    bad = evaluate("--gold", str(gold), "--pred", str(pred))
    assert bad.returncode == 1 and f"{gold}:{n}:" in bad.stderr


@pytest.mark.slow
def test_strict_iob2_mode_does_not_count_an_entity_opened_by_i(tmp_path):
    three = tmp_path / "three.conll"
    rows = ["John\tB-PER\tI-PER", "Smith\tI-PER\tI-PER", "met\tO\tO", "Mary\tB-PER\tB-PER", "",
            "Bob\tB-PER\tB-PER", "ran\tO\tO", "", "Ann\tB-PER\tB-PER", ""]
    three.write_text("\n".join(rows) + "\n", encoding="utf-8")
    def micro(proc) -> str:
        return next(line for line in proc.stdout.splitlines() if line.startswith("micro"))

    lenient = evaluate("--pred", str(three))
    strict = evaluate("--pred", str(three), "--strict")
    assert "F1 100.00" in micro(lenient), lenient.stdout + lenient.stderr
    assert "(strict IOB2)" in strict.stdout and "R 75.00" in micro(strict), strict.stdout


@pytest.mark.slow
def test_evaluate_warns_about_a_type_found_once_in_the_gold_data(folder, tmp_path):
    gold = folder / "test.conll"
    n = first_tagged_line(gold)
    word = gold.read_text().splitlines()[n - 1].split("\t")[0]
    edit_line(gold, n, f"{word}\tB-PRE")
    pred = tmp_path / "pred.conll"
    shutil.copy(gold, pred)
    proc = evaluate("--gold", str(gold), "--pred", str(pred))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{gold}:{n}: entity type 'PRE' occurs in only 1 sentence" in proc.stdout, proc.stdout
