"""The cache never returns a result the current code did not make, and every result names its code.

A stage's fingerprint covers the source of the project modules its builder
uses (:mod:`aclm.engine.code`): editing ``steps/templates.py`` re-runs S3
and what follows, not S1 or S2; a comment or docstring re-runs nothing.  The
end-to-end test runs a copy of the package in a temporary git checkout, edits
it, and reads what the rerun says and records.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aclm.base.io import read_json
from aclm.base.paths import PROJECT_ROOT
from aclm.engine import STAMP
from aclm.engine import code as provenance
from aclm.run.chain import plan, run_method
from aclm.run.naming import run_config
from aclm.stages import layout
from aclm.stages.data import data_stage
from aclm.stages.keywords import keywords_stage
from aclm.stages.layout import RunLayout
from aclm.stages.ner import s1_stage
from aclm.stages.templates import templates_stage
from conftest import FAST


def test_a_stage_digests_its_module_what_that_imports_and_their_packages_and_no_more():
    templates, keywords = "aclm.steps.templates", "aclm.steps.keywords"
    code = {stage.name: provenance.code_digests([stage.build.__module__]) for stage in (data_stage, s1_stage,
                                                                                  keywords_stage, templates_stage)}
    assert templates in code["s3_templates"] and keywords in code["s2_keywords"]
    assert templates not in code["s2_keywords"] and keywords not in code["s1_ner"]
    assert "aclm.steps.ner" in code["s2_keywords"]                  # S2 reads S1's attention
    for stage, modules in code.items():
        assert {"aclm", "aclm.base", "aclm.stages"} <= set(modules), stage      # the packages they sit in
        assert not [m for m in modules if not provenance.counts(m)], stage       # the schema, registry, engine...
        assert not {"aclm.base.config", "aclm.base.registry", "aclm.engine.stages"} & set(modules), stage


def test_the_code_read_from_the_files_agrees_with_every_stage_digest():
    """:func:`provenance.changed_code` (read from the files, importing nothing) finds no change in the digests
    each stage has now: no run made by this checkout's code is ever called stale."""
    from aclm.base.config import load_config
    from aclm.run.chain import chain

    digests = {}
    for method in ("aclm", "lwtr", "melm", "mulda", "daga", "wikineural"):
        cfg = load_config(["profile=tiny", f"method={method}"])
        digests.update({k: v for step in chain(cfg) for k, v in step.stage.code_of(cfg).items()})
    assert {"baselines.lwtr", "melm.augment", "baselines.wikineural"} <= set(digests)   # through the method table
    assert provenance.changed_code(digests) == []
    assert provenance.changed_code({"aclm.steps.templates": "0" * 16, "aclm.steps.gone": "1" * 16,
                                    "aclm.run.pipeline:keywords_stage": "2" * 16}) == [
        "aclm.steps.templates", "aclm.steps.gone", "aclm.run.pipeline:keywords_stage"]


def test_a_method_table_entry_brings_its_module_into_its_stage_code():
    from aclm.base.registry import get

    assert get("lwtr").code_modules() == ("baselines.lwtr",)
    assert get("melm").code_modules() == ("melm.augment", "melm.sources")
    digests = provenance.code_digests(get("lwtr").code_modules())
    assert "baselines.lwtr" in digests and "aclm.steps.screening" in digests      # and what it imports
    assert "baselines" in digests                                                 # and its package


def test_comments_docstrings_layout_and_log_lines_leave_the_digest_alone_and_code_does_not():
    source = 'def f(x):\n    """Why."""\n    return x + 1\n'
    same = provenance.tree_digest(source)
    assert provenance.tree_digest('def f(x):\n    # note\n    return (x\n            + 1)\n') == same
    assert provenance.tree_digest('def f(x):\n    """Another why."""\n    return x + 1\n') == same
    assert provenance.tree_digest('def f(x):\n    log.info("x=%d", x)\n    return x + 1\n') == same
    assert provenance.tree_digest('def f(x):\n    warnings.warn("odd")\n    return x + 1\n') == same
    assert provenance.tree_digest('def f(x):\n    return x + 2\n') != same
    assert provenance.tree_digest('def f(x):\n    y = log.info("x")\n    return x + 1\n') != same  # not only a log


def test_a_copied_run_folder_stays_current(fast, tmp_path):
    cfg = fast(tmp_path / "a", "method=lwtr")
    run_method(cfg)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.move(str(tmp_path / "a"), tmp_path / "moved")
    for where in ("b", "moved"):
        assert all(state == "current" for _, state in plan(fast(tmp_path / where, "method=lwtr"))), where


@pytest.mark.slow
def test_run_method_force_reruns_every_stage_and_force_from_the_rest(tiny_models, tmp_path):
    words = ["scripts/run_method.py", "method=gold_only", "profile=tiny", f"run_dir={tmp_path}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def run(*extra: str) -> str:
        done = subprocess.run([sys.executable, *words, *extra], cwd=PROJECT_ROOT, capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr

    assert "data: running (new)" in run()
    again = run("--force")
    assert all(f"{name}: running (forced)" in again for name in ("data", "s1_ner", "s1_eval")), again[-2000:]
    rest = run("--force-from", "s1_eval")
    assert "s1_ner: up to date" in rest and "s1_eval: running (forced)" in rest
    refused = subprocess.run([sys.executable, *words, "--force-from", "s4_generator"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, env=env, timeout=600)
    assert refused.returncode != 0 and "has no such stage" in refused.stderr

    before = sorted(tmp_path.rglob("*"))
    planned = subprocess.run([sys.executable, *words, "ner.epochs=3", "--dry-run"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, env=env, timeout=600).stdout.splitlines()
    assert planned[0].startswith("data            would run: new  [")
    assert re.match(r"s1_ner +would run: after data  \[(\d+ s|\d+\.\d min|under 1 s)\]", planned[1]), planned
    assert planned[-1].startswith("total: the rest takes up to about ")
    assert sorted(tmp_path.rglob("*")) == before                                           # nothing ran


# --------------------------------------------------------------------------- an edited copy of the package

def checkout_copy(where: Path) -> Path:
    """The project's code and configs in a fresh git repository; models and sample data linked, not copied."""
    for name in ("aclm", "baselines", "melm", "configs", "scripts", "tools"):
        shutil.copytree(PROJECT_ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("models", "data"):
        (where / name).symlink_to(PROJECT_ROOT / name)
    (where / ".gitignore").write_text("/models\n/data\n__pycache__/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(where)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], check=True)
    return where


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path} no longer has {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.slow
def test_editing_a_step_module_reruns_its_stage_and_those_after_it_only(tiny_models, tmp_path):
    code = checkout_copy(tmp_path / "checkout")
    words = ["method=aclm", *FAST, f"run_dir={tmp_path / 'runs'}"]
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}

    def run(*extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "scripts/run_method.py", *words, *extra], cwd=code, env=env,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    run()
    here = RunLayout.of(run_config(words))
    before = read_json(here.result_path)
    assert before["checkout"]["package"] == str(code / "aclm") and before["checkout"]["dirty"] is False

    # S3 keeps no keyword at all: a change of what it computes
    edit(code / "aclm/steps/templates.py", "    keep = set(keywords)\n", "    keep = set()\n")
    second = run().stderr
    for unchanged in ("data", "s1_ner", "s2_keywords"):
        assert f"{unchanged}: up to date" in second, second[-3000:]
    reasons = dict(re.findall(r"(\w+): running \((.*)\) -> ", second))
    assert reasons["s3_templates"] == "code changed: aclm.steps.templates"
    for later in ("s4_generator", "s5_generation", "s6_postprocess", "s7_ner", "s7_eval"):
        assert "input changed: " in reasons[later], (later, reasons)
    after = read_json(here.result_path)
    commit = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert after["checkout"]["commit"] == commit.strip() and after["checkout"]["dirty"] is True
    assert after["checkout"]["diff_sha256"]
    stamp = read_json(here.stage(layout.S3) / STAMP)
    assert stamp["checkout"]["dirty"] is True and "aclm.steps.templates" in stamp["identity"]["code"]
    print(f"tiny ACLM F1 before the edit {before['f1']:.4f}, after {after['f1']:.4f}; S6 added "
          f"{before['augmentation']['added']} then {after['augmentation']['added']}")

    # a comment and a docstring change nothing; the keyword step's code re-runs S2 and what follows
    def planned() -> dict[str, str]:
        """Stage -> its state, as --dry-run prints them (before each guessed time; then a total line)."""
        *stages, total = run("--dry-run").stdout.splitlines()
        assert total.startswith("total: ")
        return {name: re.sub(r"  \[.*\]$", "", state) for name, state in (line.split(None, 1) for line in stages)}

    edit(code / "aclm/steps/keywords.py", '"""S2: ', '"""Edited: S2: ')
    edit(code / "aclm/steps/keywords.py", "\ndef stopwords(", "\n# a comment\ndef stopwords(")
    assert set(planned().values()) == {"current"}
    # what cannot change a result re-runs nothing: a title in the method table, a key's help, a log line
    edit(code / "aclm/base/registry.py", 'title="LwTR"', 'title="LwTR (Dai & Adel)"')
    edit(code / "aclm/base/config.py", 'key("R: generations per training sentence", check=ROUNDS)', 'key("R: per sentence", check=ROUNDS)')
    edit(code / "aclm/steps/generation.py", '    counts["mixed"] =', '    log.info("%d jobs", len(jobs))\n    counts["mixed"] =')
    assert set(planned().values()) == {"current"}
    edit(code / "aclm/steps/keywords.py", "\ndef stopwords(", "\n_EDITED = True\n\n\ndef stopwords(")
    states = planned()
    assert states["s1_ner"] == "current" and states["data"] == "current"
    assert states["s2_keywords"] == "would run: code changed: aclm.steps.keywords"
    assert states["s7_eval"] == "would run: after s2_keywords"
    edit(code / "aclm/__init__.py", "", "import math\n\n_EDITED = math.pi\n")        # runs in every stage
    assert planned()["data"] == "would run: code changed: aclm"


# --- what a stage reads beyond its config, inputs and code ----------------------------------------------------

def test_weights_are_known_by_their_bytes_not_their_name_or_times(fast, tmp_path):
    encoder = tmp_path / "encoder"                   # a name that stays, as models/mini does across rebuilds
    encoder.symlink_to(PROJECT_ROOT / "models" / "tiny" / "xlm-roberta")
    cfg = fast(tmp_path / "runs", "method=gold_only", f"ner.model={encoder}")
    run_method(cfg)
    assert all(state == "current" for _, state in plan(cfg))
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(encoder, rebuilt, copy_function=shutil.copy)     # the same bytes written again: new times
    encoder.unlink()
    encoder.symlink_to(rebuilt)
    assert all(state == "current" for _, state in plan(cfg))
    weights = rebuilt / "model.safetensors"          # other weights of the same size, the modification time kept
    stat, data = weights.stat(), bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    states = dict(plan(cfg))
    assert states[layout.DATA] == "current" and "changed: model ner.model" in states[layout.S1]


def test_a_stage_output_edited_in_place_is_not_current(fast, tmp_path):
    cfg = fast(tmp_path, "method=lwtr")
    run_method(cfg)
    augmented = RunLayout.of(cfg).stage(layout.S6) / layout.GOLD_AUG
    stat, text = augmented.stat(), augmented.read_text(encoding="utf-8")
    edited = text.replace("B-PER", "B-LOC", 1)        # one tag relabelled: the same size
    assert edited != text and len(edited) == len(text)
    augmented.write_text(edited, encoding="utf-8")
    os.utime(augmented, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert dict(plan(cfg))[layout.S6] == "its files were changed or deleted"


def test_an_edited_dataset_entry_reruns_the_gold_sample(fast, tmp_path, monkeypatch):
    from dataclasses import replace

    from aclm.stages import data as s0_module

    cfg = fast(tmp_path, "method=gold_only", "dataset=sample/en", "gold=full")
    run_method(cfg)
    spec = s0_module.run_spec(cfg)
    monkeypatch.setattr(s0_module, "run_spec", lambda c: replace(spec, language="de"))   # configs/datasets.yaml
                                                                                        # now says it is German
    assert "changed: dataset sample/en" in dict(plan(cfg))[layout.DATA]


def test_code_edited_while_a_stage_runs_is_never_stamped(fast, tmp_path, monkeypatch):
    from aclm.engine.stages import NotKept

    cfg = fast(tmp_path, "method=gold_only")
    monkeypatch.setattr(provenance, "LOADED_NS", 0)   # every project file now reads as edited since loading
    with pytest.raises(NotKept, match=r"aclm/stages/data.py.* changed on disk while this process ran it"):
        run_method(cfg)
    assert not list(tmp_path.rglob(STAMP))


def test_a_file_edited_while_running_counts_only_when_its_code_changed(monkeypatch):
    from aclm.steps import templates              # the module must have run in this process

    name, path = templates.__name__, Path(templates.__file__)
    changed = path.stat().st_mtime_ns
    monkeypatch.setattr(provenance, "LOADED_NS", changed - 1)           # the file changed after the process loaded
    digest = provenance._facts(name, changed)[0]
    code = {f"{name}": digest}
    monkeypatch.setitem(provenance._FIRST_READ, name, (changed - 2, digest))      # read before: the same code
    assert provenance.edited_while_running(code) == []
    monkeypatch.setitem(provenance._FIRST_READ, name, (changed - 2, "other code"))
    assert provenance.edited_while_running(code) == ["aclm/steps/templates.py"]
    monkeypatch.setitem(provenance._FIRST_READ, name, (changed, digest))          # first read after the change
    assert provenance.edited_while_running(code) == ["aclm/steps/templates.py"]
