"""The Makefile passes DATASET, GOLD and SEED only when given: otherwise the profile's own values decide."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import uuid
from contextlib import contextmanager

import pytest


from aclm.base.config import CONFIG_DIR, load_config
from aclm.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")

#: variables a caller's shell may hold that would change what make passes
SETTING_VARIABLES = ("DATASET", "GOLD", "SEED", "ARGS", "PROFILE", "METHOD", "MAKEFLAGS")


@contextmanager
def own_profile(text: str):
    """A profile of the user's own, as the README says to write one: ``configs/profiles/<name>.yaml``."""
    name = f"test_make_{uuid.uuid4().hex[:8]}"
    path = CONFIG_DIR / "profiles" / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        yield name
    finally:
        path.unlink()


@pytest.fixture
def profile():
    with own_profile("inherits: tiny\ngold: 50\ndataset: conll2003/en\nseed: 7\n") as name:
        yield name


def commands(*args: str, **env: str) -> str:
    """What ``make -n`` prints, with none of the caller's setting variables in the environment."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTING_VARIABLES}
    proc = subprocess.run(["make", "--no-print-directory", "-n", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120, env={**clean, **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def dry_run(*args: str, **env: str) -> list[str]:
    """The key=value words of the run_method.py / ner.py command ``make -n`` prints."""
    stdout = commands(*args, **env)
    lines = [line for line in stdout.splitlines() if ("scripts/run_method.py" in line
             or "scripts/ner.py" in line) and "--models" not in line]
    assert len(lines) == 1, stdout
    return [word for word in shlex.split(lines[0]) if "=" in word]


def test_a_profiles_own_dataset_gold_and_seed_win_over_the_makefile(profile):
    words = dry_run("run", f"PROFILE={profile}", "METHOD=gold_only")
    assert not [w for w in words if w.split("=", 1)[0] in ("dataset", "gold", "seed")], words
    cfg = load_config(words)
    assert (cfg.profile, cfg.method, cfg.dataset, cfg.gold, cfg.seed) == (profile, "gold_only", "conll2003/en", 50, 7)


def test_what_the_user_gives_is_passed_on_the_command_line_or_in_the_environment(profile):
    words = dry_run("run", f"PROFILE={profile}", "METHOD=gold_only", "GOLD=200")
    assert "gold=200" in words and load_config(words).gold == 200
    words = dry_run("gold", f"PROFILE={profile}", DATASET="conll2003/de", SEED="3")
    cfg = load_config(words)
    assert (cfg.dataset, cfg.gold, cfg.seed) == ("conll2003/de", 50, 3)


def test_a_bare_run_is_still_the_paper_setting():
    cfg = load_config(dry_run("run", "METHOD=gold_only"))
    assert (cfg.profile, cfg.dataset, cfg.gold, cfg.seed) == ("paper", "multiconer/en", 100, 1)


def test_a_dataset_folder_trains_on_all_of_it_unless_gold_is_given():
    words = dry_run("run", "METHOD=gold_only", "DATASET=data/sample/en")
    assert not [w for w in words if w.startswith("gold=")]
    assert load_config(words).gold == "full"
    assert load_config(dry_run("run", "METHOD=gold_only", "DATASET=data/sample/en", "GOLD=20")).gold == 20


def test_an_empty_variable_passes_nothing(profile):
    words = dry_run("run", f"PROFILE={profile}", "METHOD=gold_only", "GOLD=", DATASET="")
    assert load_config(words).gold == 50 and load_config(words).dataset == "conll2003/en"


def test_splits_cut_the_profiles_dataset_into_a_folder_named_after_it(profile):
    assert shlex.split(commands("splits", f"PROFILE={profile}", "SEED=4"))[1:] == ["scripts/make_splits.py", f"profile={profile}", "splits.seed=4"]


def test_a_profile_of_ones_own_gets_the_models_its_run_loads_built_first():
    """The models built here come from the run's resolved config, not from the profile's name."""
    with own_profile("inherits: mini_warm\nner:\n  epochs: 3\n") as name:
        aclm, gold_only = commands("run", f"PROFILE={name}", "METHOD=aclm"), commands("gold", f"PROFILE={name}")
    assert "tools/pretrain_generator.py --kind bert2bert --out models/mini-warm" in aclm
    assert "pretrain_generator" not in gold_only and "scripts/ner.py" in gold_only   # its tagger is installed
    assert "tools/build_tiny_models.py" in commands("gold", "PROFILE=tiny")
