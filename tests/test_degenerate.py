"""Degenerate settings fail before any work, in one line naming the key: values that would make a run do
nothing or silently run another method, a gold size the train set cannot give, a model that cannot load."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aclm.base import splits
from aclm.base.config import ConfigError, load_config
from aclm.base.data import read_conll
from aclm.base.paths import PROJECT_ROOT
from aclm.base.registry import METHODS
from aclm.run.datacheck import check_setting
from aclm.stages.data import data_splits

SAMPLE = PROJECT_ROOT / "data" / "sample" / "en"
PROFILES = sorted(p.stem for p in (PROJECT_ROOT / "configs" / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("overrides,key", [
    (["generation.rounds=0"], "generation.rounds=0"),
    (["generation.rounds=-1"], "generation.rounds=-1"),
    (["ner.epochs=0"], "ner.epochs=0"),
    (["gold=0"], "gold=0"),
    (["gold=-5"], "gold=-5"),
    (["ner.lr=0"], "ner.lr=0.0"),
    (["method=melm", "melm.lr=-1e-5"], "melm.lr=-1e-05"),
    (["generator.epochs=0"], "generator.epochs=0"),
    (["method=mulda", "mulda.rounds=0"], "mulda.rounds=0"),
    (["generation.num_beams=0"], "generation.num_beams=0"),
    (["ner.batch_size=0"], "ner.batch_size=0"),
    (["lwtr.p=0"], "lwtr.p=0.0"),
    (["melm.mask_rate=1.5"], "melm.mask_rate=1.5"),
    (["generation.mixner.retrieval_k=0"], "generation.mixner.retrieval_k=0"),
    (["postprocess.max_similarity=0"], "postprocess.max_similarity=0.0"),
    (["splits.dev_size=0"], "splits.dev_size=0"),
    (["ner.early_stopping=0"], "ner.early_stopping=0"),
    (["ner.min_lr=0.1"], "ner.min_lr=0.1 is above ner.lr=0.01"),
    (["generation.mixner.mode=code", "generation.mixner.code_mixed_rounds=0"],
     "generation.mixner.code_mixed_rounds=0 with generation.mixner.mode=code"),
    (["generation.mixner.gamma_sigma=0"], "generation.mixner.gamma_sigma=0.0 with generation.mixner.beta=0.7"),
    (["seed=-1"], "seed=-1: numpy's generators take a seed from 0 to 2**32 - 1"),
    (["seed=4294967296"], "seed=4294967296"),
    (["splits.seed=-1"], "splits.seed=-1"),
    (["lwtr.replay_seed=-26"], "lwtr.replay_seed=-26"),
    # values a run cannot use at all: they would fail once it has begun, or write outside the run
    (["keywords.layers=abc"], "keywords.layers='abc': use last1, last4, all or a range like 8-11"),
    (["keywords.layers=11-8"], "keywords.layers='11-8': a range runs from the lower layer to the higher"),
    (["ner.layers=abc"], "ner.layers='abc': give all, or layer indices joined by commas"),
    (["ner.layers=-1,,-2"], "ner.layers='-1,,-2'"),
    (["method=melm", "melm.code_mix=true", "melm.code_mix_languages=[sample/de,nope/xx]"],
     "melm.code_mix_languages: unknown dataset 'nope/xx'"),
    (["setting_variant=../../x"], "setting_variant='../../x' names a folder inside the run"),
    (["variant=a/b"], "variant='a/b'"),
    (["variant=a\\b"], "variant='a\\\\b'"),
    (["setting_variant=x..y"], "setting_variant='x..y'"),
    (["variant=' '"], "variant=' '"),
])
def test_a_degenerate_value_fails_on_load_naming_its_key(overrides, key):
    with pytest.raises(ConfigError) as err:
        load_config(overrides)
    message = str(err.value)
    assert message.startswith(key) and "\n" not in message, message


@pytest.mark.parametrize("overrides", [
    ["keywords.layers=0-0", "ner.layers=all"],
    ["keywords.layers=all", "ner.layers=-1,-2,-3,-4"],
    ["keywords.p=0"],                                               # the paper's "ACLM only entity" rate
    ["gold=full"],
    ["generation.mixner.code_mixed_rounds=0"],                      # unused by mode=paper
    ["generation.mixner.gamma_sigma=0", "generation.mixner.beta=0.3"],   # always mixes
    ["method=melm", "melm.code_mix=true", "dataset=conll/multi"],   # a union borrows from its own languages
    ["ner.schedule=linear", "ner.min_lr=0.1"],                      # the floor is annealing's only
    ["seed=0", "splits.seed=4294967295"],                           # numpy's whole range
])
def test_values_that_only_look_degenerate_load(overrides):
    load_config(overrides)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_and_method_loads(profile):
    for method in METHODS:
        load_config([f"profile={profile}", f"method={method}"])


def test_a_sample_size_out_of_range_says_what_is_allowed():
    sentences = read_conll(SAMPLE / "train.conll")
    for size in (0, -5, len(sentences)):
        with pytest.raises(ValueError, match=f"cannot draw {size} of {len(sentences)} sentences: a sample holds 1"):
            splits.stratified_indices(sentences, size, seed=1)


def test_a_degenerate_run_fails_before_any_stage(tiny_models, tmp_path):
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "scripts/run_method.py", "method=aclm", "profile=tiny",
                           "generation.rounds=0", f"run_dir={runs}"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "generation.rounds=0" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not runs.exists() or not any(runs.iterdir()), "nothing may be written before the config is valid"


# --- the data check -----------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path) -> Path:
    out = tmp_path / "my_data"
    shutil.copytree(SAMPLE, out)
    return out


def test_gold_larger_than_the_training_set_fails_the_check(shared_data):
    cfg = load_config(["profile=tiny", "dataset=multiconer/en", "gold=20000", f"data_dir={shared_data}"])
    n = len(read_conll(shared_data / "multiconer" / "en" / "train_full.conll"))
    assert check_setting(cfg).errors == [f"gold=20000 is larger than multiconer/en's training set ({n} sentences); "
                                         f"give fewer, or gold=full"]
    released = load_config(["profile=tiny", "dataset=multiconer/en", "gold=100", f"data_dir={shared_data}"])
    assert check_setting(released).errors == []                     # the released sample has its own size


def test_gold_as_large_as_a_folders_training_set_fails_the_check(folder):
    n = len(read_conll(folder / "train.conll"))
    errors = check_setting(load_config(["profile=tiny", f"dataset={folder}", f"gold={n}"])).errors
    assert errors == [f"gold={n} is all of {folder}'s training set ({n} sentences); give fewer, or gold=full"]
    assert check_setting(load_config(["profile=tiny", f"dataset={folder}", f"gold={n - 1}"])).errors == []


def test_code_mixing_with_no_language_to_borrow_from_fails_the_check(folder):
    melm = ["profile=tiny", "method=melm", "melm.code_mix=true", f"dataset={folder}"]
    errors = check_setting(load_config(melm)).errors
    assert len(errors) == 1 and errors[0].startswith("melm.code_mix_languages=[] with melm.code_mix=true"), errors
    assert check_setting(load_config([*melm, "melm.code_mix_languages=[sample/de]"])).errors == []


def test_code_mixing_from_the_gold_datas_own_language_fails_the_check(folder):
    melm = ["profile=tiny", "method=melm", "melm.code_mix=true", f"dataset={folder}"]
    errors = check_setting(load_config([*melm, "melm.code_mix_languages=[sample/de,sample/en]"])).errors
    assert errors == [f"melm.code_mix_languages=[sample/de, sample/en] names sample/en, in 'en' like {folder}: "
                      f"code-mixing borrows entities from other languages; name datasets in another language, "
                      f"or melm.code_mix=false"]


def test_attention_layers_past_the_encoders_fail_the_check(tiny_models, folder):
    aclm = ["profile=tiny", "method=aclm", f"dataset={folder}"]        # the tiny encoder has 12 layers
    errors = check_setting(load_config([*aclm, "keywords.layers=10-13"])).errors
    assert errors == ["keywords.layers='10-13' does not fit a model with 12 layers: ner.model=models/tiny/xlm-roberta, "
                      "whose attention S2 reads"]
    assert check_setting(load_config([*aclm, "keywords.layers=8-11"])).errors == []
    assert check_setting(load_config([*aclm[:1], f"dataset={folder}", "keywords.layers=10-13"])).errors == []  # Gold-only


def test_a_gold_sample_without_a_type_its_test_set_has_fails_the_check(tmp_path):
    mine = tmp_path / "rare"
    mine.mkdir()
    people = "".join(f"anna{i}\tB-PER\nsang\tO\n\n" for i in range(50))
    (mine / "train.conll").write_text(people + "in\tO\nrome\tB-LOC\n\n" * 3)
    (mine / "dev.conll").write_text("bob\tB-PER\nran\tO\n\n")
    (mine / "test.conll").write_text("bob\tB-PER\nin\tO\nparis\tB-LOC\n\n")
    small = check_setting(load_config(["profile=tiny", f"dataset={mine}", "gold=5"])).errors
    assert small == [f"the gold sample (gold=5, splits.seed=1) has no LOC entities, which test set {str(mine)!r} has: "
                     f"the tagger could never predict them; give a larger gold= or another splits.seed"]
    assert check_setting(load_config(["profile=tiny", f"dataset={mine}", "gold=40"])).errors == []


def test_a_dev_set_taken_from_train_is_a_warning(folder, caplog):
    (folder / "dev.conll").unlink()
    n = len(read_conll(folder / "train.conll"))
    cfg = load_config(["profile=tiny", f"dataset={folder}"])
    report = check_setting(cfg)
    assert report.errors == []
    assert report.warnings == [f"{folder} has no dev file: S0 takes {n // 10} of the {n} sentences of its train set "
                               f"({folder / 'train.conll'}) as its dev set"]
    with caplog.at_level(logging.WARNING, logger="aclm.stages.data"):
        train, dev = data_splits(cfg)
    assert (len(train), len(dev)) == (n - n // 10, n // 10)
    assert f"{n // 10} of the {n} sentences of {folder / 'train.conll'} are taken as its dev set" in caplog.text


# --- a model neither here nor reachable --------------------------------------------------------

#: What says where the hub and its cache are, and whether to ask it (CI sets the offline ones).
HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_ENDPOINT")


def check_data(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``scripts/check_data.py`` in a subprocess whose hub variables are ``env`` alone, and its seconds."""
    clean = {k: v for k, v in os.environ.items() if k not in HUB_VARIABLES}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "scripts/check_data.py", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, env={**clean, **env}, timeout=300)
    return proc, time.perf_counter() - start


@pytest.fixture(scope="module")
def startup() -> float:
    """Seconds the script takes to start (its imports, several seconds on a busy 2-core machine): ``--help``."""
    proc, seconds = check_data("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return seconds


@pytest.mark.parametrize("offline,reason", [
    ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "http://127.0.0.1:9 did not answer"),     # a closed port
    ({"HF_HUB_OFFLINE": "1"}, "(HF_HUB_OFFLINE=1)"),
], ids=["closed-port", "offline-mode"])
def test_a_model_neither_cached_nor_reachable_is_named_in_one_line_within_seconds(offline, reason, shared_data,
                                                                                  startup, tmp_path):
    proc, seconds = check_data("profile=paper", "dataset=multiconer/en", f"data_dir={shared_data}",
                               HF_HOME=str(tmp_path / "hf"), **offline)
    print(f"failed in {seconds:.1f} s; --help takes {startup:.1f} s")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-2000:]
    named = [line for line in output.splitlines() if "xlm-roberta-large" in line]
    assert len(named) == 1 and "(ner.model)" in named[0] and "the hub is unreachable" in named[0], output[-2000:]
    assert reason in named[0], named[0]
    assert not any(word in output for word in ("Retrying", "MaxRetryError", "Max retries")), output[-2000:]
    # the margin holds the check's own reading of the data under load (it ran 10.1 s of 9.7 allowed at a load of
    # 7 with +8); transformers' retries would take close to a minute, the one probe takes 3 s at most
    assert seconds < startup + 20, "transformers' retries take close to a minute: the one probe takes 3 s at most"


def test_a_run_stopping_early_is_checked_for_the_models_its_stages_load(monkeypatch, tmp_path, shared_data):
    from aclm.run.chain import chain

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))         # nothing cached
    cfg = load_config(["profile=paper", "method=aclm", f"data_dir={shared_data}"])
    steps = chain(cfg)
    up_to_s2 = [key for step in steps[:3] for key in step.stage.keys_of(cfg)]   # data, S1, S2
    everything = [key for step in steps for key in step.stage.keys_of(cfg)]
    assert sorted(check_setting(cfg, up_to_s2).errors) == sorted(
        e for e in check_setting(cfg, everything).errors if "(ner.model)" in e)
    assert any("(generator.model)" in e for e in check_setting(cfg, everything).errors)


@pytest.mark.parametrize("overrides,flag", [
    (["keywords.p=0"], "S2 kept no keyword (keywords.p=0.0"),
    (["keywords.max_subtokens=1"], "S2 kept no keyword (keywords.p=0.3, keywords.max_subtokens=1)"),
    (["generation.mixner.beta=2"], "S5 mixed no template (generation.mixner: mode paper, beta 2"),
    (["generation.mixner.gamma_sigma=0.0001"], "S5 mixed no template"),
])
def test_aclm_with_no_keyword_or_nothing_mixed_runs_under_its_name_flagged(fast, tmp_path, overrides, flag):
    """Table 5 sweeps p down to 0, so such values run; their result says what ran and warns."""
    from aclm.run.chain import run_to_result

    result = json.loads((run_to_result(fast(tmp_path, "method=aclm", *overrides)) / "result.json").read_text())
    assert any(warning.startswith(flag) for warning in result["warnings"]), result["warnings"]
    assert result["ran"]["keywords" if flag.startswith("S2") else "mixed"] == 0


def test_plain_aclm_says_what_it_ran_and_is_not_flagged(fast, tmp_path):
    from aclm.run.chain import run_to_result

    result = json.loads((run_to_result(fast(tmp_path, "method=aclm")) / "result.json").read_text())
    assert result["ran"]["keywords"] > 0 and result["ran"]["mixed"] > 0
    assert not [w for w in result["warnings"] if w.startswith(("S2 kept", "S5 mixed"))]
