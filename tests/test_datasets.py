"""The dataset registry: local files for every entry, fetched from the hub where an entry says how."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from aclm.base.data import DataError
from aclm.base.datasets import fetch_from_hub, get_spec, load_split, registry, run_spec
from aclm.base.paths import PROJECT_ROOT


@pytest.mark.slow
def test_every_registered_file_reads_cleanly(shared_data):
    for name, spec in registry().items():
        if spec.union or spec.obtain:     # users bring the files of an `obtain` entry (test below)
            continue
        for split in ("train", "dev", "test"):
            sentences = load_split(name, split, shared_data)
            if getattr(spec, split) is not None:
                assert sentences, (name, split)
                assert all(len(s.tokens) == len(s.tags) for s in sentences)


def test_released_samples_are_registered(shared_data):
    sample = load_split("multiconer/hi", 200, shared_data)
    assert 180 <= len(sample) <= 220


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(KeyError, match="multiconer/en"):
        get_spec("multiconer/xx")


def test_missing_file_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_split("tdmsci", "train", tmp_path)


def test_an_unknown_format_fails_when_the_registry_loads(tmp_path):
    path = tmp_path / "datasets.yaml"
    path.write_text("mine:\n  language: en\n  format: tokentag\n  train: mine/train.conll\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: dataset 'mine': format 'tokentag' is not one "
                                        rf"of auto, token_tag, index_token_tag, token_offset_tag, multiconer$"):
        registry(path)


# --------------------------------------------------------------------------- the official MultiCoNER files

FIXTURES = Path(__file__).parent / "fixtures"
LANGUAGES = ("en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr", "zh")


def test_official_multiconer_entries_read_the_release_layout():
    sentences = load_split("multiconer_official/en", "test", FIXTURES)       # `# id` lines, `token _ _ TAG`
    assert [s.tokens for s in sentences][:2] == [
        ["the", "lighthouse", "keepers", "was", "filmed", "near", "port", "elira", "."],
        ["maren", "tollefsen", "joined", "the", "brass", "harbour", "quartet"]]
    assert [len(s.spans()) for s in sentences] == [2, 2, 0, 2]
    assert {t for s in sentences for t in s.entity_types} == {"CW", "LOC", "PER", "GRP", "CORP", "PROD"}
    for lang in LANGUAGES:   # the release's folders; the authors' samples stay the low-resource ones
        spec = get_spec(f"multiconer_official/{lang}")
        assert spec.language == lang and spec.test.endswith(f"/{lang}_test.conll") and spec.obtain
        assert spec.samples == get_spec(f"multiconer/{lang}").samples
    assert get_spec("multiconer_official/multi").union == [f"multiconer_official/{x}" for x in LANGUAGES]


def test_a_missing_official_file_says_where_the_release_goes(tmp_path):
    with pytest.raises(FileNotFoundError, match="not shipped: the official MultiCoNER v1 release.*"
                                                "<data_dir>/multiconer_official/"):
        load_split("multiconer_official/de", "test", tmp_path)


@pytest.mark.slow
def test_official_test_set_scores_through_the_registry(tmp_path):
    spec = get_spec("multiconer_official/en")
    gold = spec.path(spec.test, FIXTURES)
    sentences = load_split("multiconer_official/en", "test", FIXTURES)
    predicted = [list(s.tags) for s in sentences]
    predicted[1][4:7] = ["B-CORP", "I-CORP", "I-CORP"]                   # one of six entities mistyped
    pred = tmp_path / "pred.conll"
    pred.write_text("".join("".join(f"{w}\t{t}\n" for w, t in zip(s.tokens, tags)) + "\n"
                            for s, tags in zip(sentences, predicted)), encoding="utf-8")
    out = tmp_path / "scores.json"
    proc = subprocess.run([sys.executable, "scripts/evaluate.py", "--gold", str(gold), "--pred", str(pred),
                           "--json", str(out)], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(out.read_text())[str(pred)]
    assert scores["sentences"] == 4
    assert scores["precision"] == pytest.approx(500 / 6) and scores["recall"] == pytest.approx(500 / 6)
    assert scores["per_type"]["GRP"]["f1"] == 0 and scores["per_type"]["PER"]["f1"] == 100


def fake_hub(monkeypatch) -> list:
    """``datasets.load_dataset`` answering every split with one sentence (tag ids, as the hub gives them)."""
    class Split(list):
        features = {"ner_tags": types.SimpleNamespace(feature=types.SimpleNamespace(names=["O", "B-PER", "I-PER"]))}

    calls = []

    def load_dataset(path, name, split):
        calls.append((path, name, split))
        return Split([{"tokens": ["ann", "lee", split], "ner_tags": [2, 2, 0]}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls


def test_a_hub_dataset_is_fetched_into_the_data_folder_once_and_read_from_there(tmp_path, monkeypatch):
    calls = fake_hub(monkeypatch)
    with pytest.raises(FileNotFoundError, match=r"with `python scripts/fetch_data.py dataset=conll2002/es`"):
        load_split("conll2002/es", "dev", tmp_path)                  # runs read files only: no silent download
    assert calls == []
    assert fetch_from_hub("conll2002/es", tmp_path) == {"train": 1, "dev": 1, "test": 1}
    assert calls == [("eriktks/conll2002", "es", split) for split in ("train", "validation", "test")]
    assert (tmp_path / "conll" / "es" / "val.conllu").read_text() == "ann\tB-PER\nlee\tI-PER\nvalidation\tO\n\n"
    assert load_split("conll2002/es", "dev", tmp_path)[0].tags == ["B-PER", "I-PER", "O"]   # normalised as read
    assert fetch_from_hub("conll2002/es", tmp_path) == {"train": None, "dev": None, "test": None}
    assert len(calls) == 3                                           # what is there is not fetched again
    assert fetch_from_hub("wikineural/de", tmp_path) == {"train": 1}          # its own split name; no dev, no test
    assert calls[-1] == ("Babelscape/wikineural", None, "train_de")
    with pytest.raises(DataError, match=r"tdmsci/train.conll: missing, and dataset 'tdmsci' names no hub dataset"):
        fetch_from_hub("tdmsci", tmp_path)


def test_a_hub_that_does_not_answer_is_one_line_naming_the_dataset(tmp_path, monkeypatch):
    def offline(path, name, split):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(DataError, match=r"dataset 'bc2gm': Couldn't reach 'spyysalo/bc2gm_corpus' on the Hub"):
        fetch_from_hub("bc2gm", tmp_path)
    assert not list(tmp_path.rglob("*.tsv"))


def test_tag_ids_without_names_on_the_hub_need_them_named_in_the_entry(monkeypatch):
    from aclm.base.datasets import DatasetSpec, load_from_hub

    class Ids(list):                                  # ner_tags a sequence of plain values, not of a ClassLabel
        features = {"ner_tags": types.SimpleNamespace(feature=types.SimpleNamespace(dtype="int64"))}

    rows = Ids([{"tokens": ["ann", "sang"], "ner_tags": [1, 0]}])
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda path, name, split: rows))
    with pytest.raises(DataError, match="gives its tags as ids without names; list the names in id order as hf.tags"):
        load_from_hub(DatasetSpec(name="x", language="en", hf={"path": "org/x"}), "train")
    named = load_from_hub(DatasetSpec(name="x", language="en", hf={"path": "org/x", "tags": ["O", "B-PER"]}), "train")
    assert named[0].tags == ["B-PER", "O"]


def test_a_union_is_fetched_member_by_member(tmp_path, monkeypatch):
    fake_hub(monkeypatch)
    german = get_spec("conll2003/de")                                 # no hub coordinates: its files must be there
    for rel in (german.train, german.dev):
        german.path(rel, tmp_path).parent.mkdir(parents=True, exist_ok=True)
        german.path(rel, tmp_path).write_text("Anna\tB-PER\n\n")
    with pytest.raises(DataError, match=r"conll/de/test.conllu: missing, and dataset 'conll2003/de' names no hub"):
        fetch_from_hub("conll/multi", tmp_path)
    assert (tmp_path / "conll" / "en" / "test.conllu").exists()        # the members before it are kept
    german.path(german.test, tmp_path).write_text("Anna\tB-PER\n\n")
    written = fetch_from_hub("conll/multi", tmp_path)
    assert written == {f"{member} {split}": None if member in ("conll2003/en", "conll2003/de") else 1
                       for member in get_spec("conll/multi").union for split in ("train", "dev", "test")}


# --------------------------------------------------------------------------- bring your own data: a folder

EN = [("john smith went to the city of paris with his friends", "B-PER I-PER O O O O O B-LOC O O O"),
      ("the band played in london and it was very good", "O O O O B-LOC O O O O O"),
      ("mary said that she would not go there again", "B-PER O O O O O O O O"),
      ("acme corp is one of the largest companies in the world", "B-CORP I-CORP O O O O O O O O O")]
DE = [("johann schmidt ging mit seinen freunden in die stadt", "B-PER I-PER O O O O O O O"),
      ("die band spielte in berlin und es war sehr gut", "O O O O B-LOC O O O O O"),
      ("maria sagte dass sie nicht mehr dorthin gehen wird", "B-PER O O O O O O O O"),
      ("acme ist eine der größten firmen der welt", "B-CORP O O O O O O O")]


def write_folder(folder, splits=("train", "dev", "test"), sentences=EN, ext=".conll"):
    """A dataset folder: each split a copy of ``sentences`` (token<TAB>tag lines)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join("".join(f"{w}\t{t}\n" for w, t in zip(words.split(), tags.split())) + "\n"
                   for words, tags in sentences)
    for split in splits:
        (folder / f"{split}{ext}").write_text(text, encoding="utf-8")
    return folder


def test_a_folder_with_all_three_files_is_a_dataset(tmp_path, monkeypatch):
    from aclm.base.config import load_config
    from aclm.base.datasets import dataset_error, run_name

    folder = write_folder(tmp_path / "My Data")
    name = str(folder)
    assert dataset_error(name) is None and "no folder" in dataset_error(str(tmp_path / "nowhere"))
    spec = get_spec(name)
    assert (spec.name, spec.root, spec.format, spec.language) == (name, "absolute", "auto", "en")
    assert [spec.train, spec.dev, spec.test] == [str(folder / f"{s}.conll") for s in ("train", "dev", "test")]
    for split in ("train", "dev", "test"):
        sentences = load_split(name, split, "/data/dir/not/used")
        assert [(" ".join(s.tokens), " ".join(s.tags)) for s in sentences] == EN
    # the run tree gets a safe relative name, one per folder
    assert spec.run_name == run_name(name) and spec.run_name.startswith("local/My_Data-")
    assert not spec.run_name.startswith("/") and ".." not in spec.run_name.split("/")
    assert run_name(str(write_folder(tmp_path / "other" / "My Data"))) != spec.run_name
    assert run_name("multiconer/en") == get_spec("multiconer/en").run_name == "multiconer/en"
    # a path relative to the working directory, through the config's validation
    monkeypatch.chdir(tmp_path)
    cfg = load_config(["profile=tiny", "method=lwtr", "dataset=My Data"])
    assert get_spec(cfg.dataset).train == str(folder / "train.conll") and run_name(cfg.dataset) == spec.run_name


def test_a_folder_with_only_train_carves_dev_and_has_no_test(tmp_path):
    from aclm.base.config import load_config
    from aclm.base.data import DataError
    from aclm.base.datasets import require_split
    from aclm.stages import data as s0_module

    folder = write_folder(tmp_path / "only_train", splits=("train",), sentences=EN * 5)
    cfg = load_config(["profile=tiny", "method=lwtr", f"dataset={folder}", "gold=full", f"run_dir={tmp_path}"])
    assert load_split(cfg.dataset, "dev") is None                 # carved out of train by the data stage
    train, dev = s0_module.data_splits(cfg)
    assert len(train) + len(dev) == 20 and 1 <= len(dev) <= 2     # dev: up to a tenth, disjoint from train
    assert not {s.meta["source"] for s in train} & {s.meta["source"] for s in dev}   # file:line: repeated words
    with pytest.raises(DataError, match=r"only_train has no test file.*add test\.conll \(or test\.conllu"):
        load_split(cfg.dataset, "test")                          # runs are scored on it: an error, not None
    with pytest.raises(DataError, match="only_train has no test file"):
        require_split(cfg.dataset, "test")
    assert require_split("multiconer/en", "test") == "multiconer/en/test.conll"


def test_other_file_names_are_read_and_two_for_one_split_are_refused(tmp_path):
    folder = write_folder(tmp_path / "named", splits=("train",), ext=".txt")
    write_folder(folder, splits=("val",), ext=".tsv")
    spec = get_spec(str(folder))
    assert (Path(spec.train).name, Path(spec.dev).name, spec.test) == ("train.txt", "val.tsv", None)
    write_folder(folder, splits=("dev",))
    from aclm.base.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"several dev files \(dev.conll, val.tsv\)"):
        load_config(["profile=tiny", f"dataset={folder}"])


def test_language_is_detected_from_stop_words_and_logged(tmp_path, caplog):
    caplog.set_level("INFO", logger="aclm.base.datasets")
    assert get_spec(str(write_folder(tmp_path / "en"))).language == "en"
    assert get_spec(str(write_folder(tmp_path / "de", sentences=DE))).language == "de"
    logged = [r.getMessage() for r in caplog.records]
    assert any("language 'en' detected from train.conll" in m and "stop words of 'en' are" in m for m in logged)
    assert any("language 'de' detected" in m for m in logged)


def test_language_given_in_the_config_wins(tmp_path):
    from aclm.base.config import ConfigError, load_config

    folder = write_folder(tmp_path / "en_text")                   # English text, declared German
    cfg = load_config(["profile=tiny", f"dataset={folder}", "language=de"])
    assert cfg.language == "de" and run_spec(cfg).language == "de"
    assert run_spec(load_config(["profile=tiny", f"dataset={folder}"])).language == "en"   # not given: detected
    assert get_spec(str(folder)).language == "en"
    with pytest.raises(ConfigError, match="registered as 'en'"):
        load_config(["profile=tiny", "dataset=multiconer/en", "language=de"])
    with pytest.raises(ConfigError, match="ISO 639-1"):
        load_config(["profile=tiny", f"dataset={folder}", "language=German"])


def test_text_without_stop_words_asks_for_the_language(tmp_path):
    from aclm.base.data import DataError

    from aclm.base.config import load_config

    folder = write_folder(tmp_path / "codes", sentences=[("xq7 zzv qwrt", "B-PER O O")])
    with pytest.raises(DataError, match="cannot tell its language.*language=<ISO 639-1 code>"):
        run_spec(load_config(["profile=tiny", f"dataset={folder}"]))
    assert get_spec(str(folder)).language is None and load_split(str(folder), "train")   # its files still read
    assert run_spec(load_config(["profile=tiny", f"dataset={folder}", "language=en"])).language == "en"


def test_a_wrong_folder_is_a_clear_error(tmp_path):
    from aclm.base.config import ConfigError, load_config

    folder = tmp_path / "wrong"
    folder.mkdir()
    (folder / "notes.md").write_text("hello")
    write_folder(folder, splits=("training",))
    with pytest.raises(ConfigError, match=rf"dataset folder {folder} holds no training file: expected train\.conll "
                                          r"\(or train\.conllu, train\.tsv, train\.txt\).*found: notes\.md, "
                                          r"training\.conll"):
        load_config(["profile=tiny", f"dataset={folder}"])
    with pytest.raises(ConfigError, match=r"unknown dataset '.*missing': not in .*datasets\.yaml .*and no folder /"):
        load_config(["profile=tiny", f"dataset={tmp_path / 'missing'}"])
    with pytest.raises(KeyError, match="holds no training file"):
        get_spec(str(folder))
