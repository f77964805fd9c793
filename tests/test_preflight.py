"""``make preflight`` (scripts/preflight.py) on the real-vocabulary stand-ins, and the real vocabulary's
S0-S7 in each MultiCoNER language."""

from __future__ import annotations

import subprocess
import sys

import pytest
from transformers import AutoTokenizer

from aclm.base.io import read_jsonl
from aclm.base.paths import PROJECT_ROOT
from aclm.run.chain import run_method
from aclm.run.modelcheck import check_models, tagger
from aclm.run.naming import run_config
from aclm.stages import layout, outputs
from aclm.stages.data import data_splits

LANGUAGES = ("en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr", "zh")
STAGES = ("data", "s1_ner", "s2_keywords", "s3_templates", "s4_generator", "s5_generation", "s6_postprocess",
          "s7_ner", "s7_eval")


def preflight(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/preflight.py", "profile=tiny_250k", *overrides],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_preflight_on_the_real_vocabulary_stand_ins(real_vocab, tiny_models):
    done = preflight("generation.rounds=2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "MBart50TokenizerFast, 250,066 pieces with the label tokens, 250,054 embedding rows" in out
    assert "en: en_XX (id 250004) opens source and target, </s> closes them" in out
    assert "sample/en lengths: S4 targets over generator.max_length=" in out
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()[:1] and
             line.split()[0] in STAGES}
    assert list(table) == list(STAGES)
    assert all(float(cells[0]) >= 0 for cells in table.values())
    assert table["s5_generation"][-1] == "32"          # "<share> of 32": 16 sentences x 2 rounds
    assert out.rstrip().endswith("preflight passed")


@pytest.mark.slow
def test_preflight_names_a_model_that_does_not_load_before_any_stage(real_vocab, tiny_models):
    done = preflight("generator.model=models/tiny-250k/no-such-model", "run_dir=runs/preflight-missing")
    assert done.returncode == 1
    assert "preflight failed: " in done.stderr and "no-such-model" in done.stderr
    assert "make real-vocab-models" in done.stderr                    # the target that builds the folder
    assert not (PROJECT_ROOT / "runs" / "preflight-missing").exists()


def test_a_tagger_tokenizer_without_a_length_limit_is_a_problem(real_vocab, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(real_vocab / "xlm-roberta")
    assert not tagger("ner.model", str(real_vocab / "xlm-roberta")).problems
    tokenizer.model_max_length = int(1e30)            # what a hub tokenizer without the key loads with
    tokenizer.save_pretrained(tmp_path)
    assert "no model_max_length" in tagger("ner.model", str(tmp_path)).problems[0]


@pytest.mark.slow
def test_s0_to_s7_in_the_ten_languages_on_the_real_vocabulary(real_vocab, tiny_models, shared_data, tmp_path):
    """One multilingual run (the union of the ten MultiCoNER languages, 10 gold sentences each): every
    language's code frames its sequences, S4 cuts no target, S5 writes for every language, S7 is scored on
    every language's test set."""
    cfg = run_config(["profile=tiny_250k", "method=aclm", "dataset=multiconer/multi", "gold=10",
                      "splits.dev_size=10", "ner.epochs=1", "generator.epochs=1", "generation.rounds=1",
                      "generation.num_beams=1", "generation.max_length=64", f"run_dir={tmp_path}"])
    train, _ = data_splits(cfg)
    found = check_models(cfg, LANGUAGES, train)
    assert not found.problems
    framed = [line for line in found.lines if "opens source and target" in line]
    assert sorted(line.split(":")[0].strip() for line in framed) == sorted(LANGUAGES)
    done = run_method(cfg)
    assert list(done) == list(STAGES)
    assert all(c["cut"] == 0 for c in outputs.facts(done[layout.S4])["cut_targets"].values())  # 256 holds all
    languages = outputs.sentence_languages(done[layout.DATA], "train")
    generations = read_jsonl(done[layout.S5] / layout.GENERATIONS)
    assert len(generations) == len(languages) and {languages[g["source"]] for g in generations} == set(LANGUAGES)
    tested = [k for k in outputs.result(done[layout.S7_EVAL])["sizes"] if k.startswith("test:")]
    assert len(tested) == len(LANGUAGES)
