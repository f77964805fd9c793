"""Every config key is explained once, in the schema, and a stage script's ``--help`` shows the keys its stage
reads with their values under the chosen profile, without loading a training library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from aclm.base.config import ConfigError, key_help, load_config, schema_keys
from aclm.base.paths import PROJECT_ROOT

TRAINING = ("torch", "flair", "transformers", "sklearn", "sentence_transformers")


def test_every_schema_key_says_what_it_means():
    unexplained = [name for name, f in schema_keys().items() if len(f.metadata["help"].split()) < 2]
    assert unexplained == []


def test_a_keys_help_gives_the_choices_and_the_bound_a_load_holds_it_to():
    assert "[off | labels | entities]" in key_help("generation.constrained")
    with pytest.raises(ConfigError, match=r"generation.constrained='loose' is not one of \('off', 'labels', "):
        load_config(["generation.constrained=loose"])
    meaning, _, bound = key_help("generation.rounds").partition("; bound: ")
    assert meaning == "R: generations per training sentence" and bound.startswith("fewer than 1 round")
    with pytest.raises(ConfigError) as err:
        load_config(["generation.rounds=0"])
    assert str(err.value) == f"generation.rounds=0: {bound}"


def run_help(script: str, *words: str) -> tuple[str, list[str]]:
    """The help text of ``script`` and the training libraries loaded while printing it."""
    probe = (f"import runpy, sys\nsys.argv = ['{script}', '--help', *{list(words)!r}]\n"
             f"try:\n    runpy.run_path('scripts/{script}', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             f"print(__import__('json').dumps([m for m in {TRAINING!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    *text, loaded = done.stdout.splitlines()
    return "\n".join(text), json.loads(loaded)


def test_a_stage_scripts_help_lists_its_keys_with_the_profiles_values_and_meanings():
    text, loaded = run_help("keywords.py", "profile=mini")
    assert loaded == []
    assert "method=aclm, profile=mini" in text
    mini = load_config(["profile=mini", "method=aclm"])
    assert f"keywords.layers = {mini.keywords.layers}" in text and f"keywords.p = {mini.keywords.p}" in text
    assert "keyword rate: k = ceil(p x non-entity words)" in text
    assert "sentences per attention batch; bound: a batch holds 1 sentence or more" in text
    assert "generator.lr" not in text and "ner.lr" not in text          # S4's and S1's keys, not S2's
    tiny, _ = run_help("keywords.py", "profile=tiny", "keywords.p=0.7", "tensorboard=off")
    assert "keywords.p = 0.7" in tiny
    assert "tensorboard = off" in tiny and "device = auto" in tiny     # the keys every stage sees, too


def test_run_method_help_lists_every_stage_of_the_chain():
    text, loaded = run_help("run_method.py", "method=lwtr", "profile=tiny")
    assert loaded == []
    for stage in ("data:", "s1_ner:", "augment:", "s6_postprocess:", "s7_eval:"):   # s7_ner: S1's keys
        assert f"  {stage}" in text, stage
    assert "lwtr.p = " in text and "postprocess.on_nothing_added = " in text
