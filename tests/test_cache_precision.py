"""The cache's precision, as a specification: for each edit of the project, which stages must re-run.

Both directions count.  An edit that can change a result (a step, a base module a step computes with, a
baseline's or MELM's module under its method, code reached through the method table or a config switch, a
module constant, a package's ``__init__``, a YAML value a stage reads) re-runs the stage that reads it and
every stage after it; an edit that cannot (a method added to the table, a key's help, title or choices, a
new key at a default that keeps behaviour, logging, progress bars, TensorBoard, the locks, the ledger, the
engine, the driver, tools/, the tables, the grids) re-runs nothing.

Each edit is made in a copy of the project; a fresh process there prints every stage's identity (its
config view, its code and what else it reads) for the chains of ACLM, LwTR and MELM, and the stages that
re-run are those whose identity differs, with every stage that reads one of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.engine.identity import differences

CHAINS = ("aclm", "lwtr", "melm")
PROBE = """
import json, sys
from aclm.base.config import load_config
from aclm.engine.identity import view
from aclm.run.chain import chain
from aclm.stages.declare import defaults

out = {"defaults": {k: v for k, v in defaults().items() if isinstance(v, (int, float, str, bool, type(None)))}}
for method in sys.argv[1:]:
    cfg = load_config(["profile=tiny", f"method={method}"])
    out[method] = {step.name: {
        "identity": {"config": step.stage.fingerprint(cfg), "code": step.stage.code_of(cfg), "inputs": {},
                     "version": step.stage.version,
                     "reads": step.stage.reads(view(cfg, step.stage.keys_of(cfg))) if step.stage.reads else {}},
        "reads_from": [*step.inputs.values(), *(["every earlier"] if step.scores else [])]}
        for step in chain(cfg)}
print(json.dumps(out))
"""

S0, S1, S1_EVAL, S2, S3, S4, S5 = "data", "s1_ner", "s1_eval", "s2_keywords", "s3_templates", "s4_generator", \
    "s5_generation"
AUGMENT, S6, S7, S7_EVAL = "augment", "s6_postprocess", "s7_ner", "s7_eval"
NONE = {}
EVERY = {m: (S0,) for m in CHAINS}

#: (what is edited, file, old text, new text, {method: the first stages that must re-run}); a method left
#: out re-runs nothing.  "old" must occur in the file (the test says so when the code moves).
EDITS = [
    # --- must re-run -------------------------------------------------------------------------------------
    ("a step's code: S3 keeps no keyword", "aclm/steps/templates.py", "    keep = set(keywords)\n",
     "    keep = set()\n", {"aclm": (S3,)}),
    ("a module constant of a step", "aclm/steps/keywords.py", "\ndef stopwords(",
     "\n_EDITED = True\n\n\ndef stopwords(", {"aclm": (S2,)}),
    ("the tagger S1 and S7 train", "aclm/steps/ner.py", "\ndef load_tagger(",
     "\n_EDITED = True\n\n\ndef load_tagger(", {m: (S1, S6) for m in CHAINS}),      # S6: the consistency filter
    ("the CoNLL readers", "aclm/base/data.py", "\ndef read_conll(", "\n_EDITED = 1\n\n\ndef read_conll(", EVERY),
    ("the stratified sample", "aclm/base/splits.py", "\ndef stratified_indices(",
     "\n_EDITED = 1\n\n\ndef stratified_indices(", EVERY),
    ("the scorer", "aclm/base/metrics.py", "\ndef evaluate_tags(", "\n_EDITED = 1\n\n\ndef evaluate_tags(",
     {m: (S1, S7) for m in CHAINS}),
    ("new tokens (the generator's label tokens)", "aclm/base/tokens.py", "\ndef ", "\n_EDITED = 1\n\n\ndef ",
     {"aclm": (S4,), "melm": (AUGMENT,)}),
    ("the seeds", "aclm/base/runtime.py", "\ndef seed_everything(", "\n_EDITED = 1\n\n\ndef seed_everything(",
     {"aclm": (S1,), "lwtr": (S1, AUGMENT), "melm": (S1, AUGMENT)}),
    ("the one reader of each stage's files", "aclm/stages/outputs.py", "\ndef gold(", "\n_EDITED = 1\n\n\ndef gold(",
     {"aclm": (S1,), "lwtr": (S1, AUGMENT), "melm": (S1, AUGMENT)}),
    ("S0's stage module", "aclm/stages/data.py", "\ndef dataset_files(", "\n_EDITED = 1\n\n\ndef dataset_files(",
     EVERY),
    ("the scoring stage only", "aclm/stages/scores.py", "\ndef chain_record(", "\n_EDITED = 1\n\n\ndef chain_record(",
     {m: (S1_EVAL, S7_EVAL) for m in CHAINS}),
    ("the constrained decoder, reached through generation.constrained", "aclm/steps/constraints.py",
     "_NO_BUDGET = 1 << 30", "_NO_BUDGET = 1 << 29", {"aclm": (S5,)}),
    ("a constant of another module (the screening vocabulary)", "aclm/steps/screening.py",
     'MALFORMED = "malformed_"', 'MALFORMED = "broken_"', {"aclm": (S3,), "lwtr": (AUGMENT,), "melm": (AUGMENT,)}),
    ("an lru_cache'd function (the dataset registry)", "aclm/base/datasets.py", "\n@lru_cache(maxsize=None)\n",
     "\n_EDITED = 1\n\n\n@lru_cache(maxsize=None)\n", EVERY),
    ("a class's method (the label grammar)", "aclm/steps/constraints.py", "    def _initial(self",
     "    def _unused(self):\n        return 1\n\n    def _initial(self", {"aclm": (S5,)}),
    ("a lambda (S5's batch order)", "aclm/steps/generation.py", "-len(jobs[j].template), j)",
     "len(jobs[j].template), j)", {"aclm": (S5,)}),
    ("LwTR's module, under LwTR only", "baselines/lwtr.py", "\ndef augment_gold(",
     "\n_EDITED = 1\n\n\ndef augment_gold(", {"lwtr": (AUGMENT,)}),
    ("MELM's generation, under MELM only", "melm/generation.py", "\ndef ", "\n_EDITED = 1\n\n\ndef ",
     {"melm": (AUGMENT,)}),
    ("the top-level package every stage imports", "aclm/__init__.py", "", "import math\n\n_EDITED = math.pi\n", EVERY),
    ("the baselines' package", "baselines/__init__.py", '"""\n', '"""\n\nEDITED = 1\n', {"lwtr": (AUGMENT,)}),
    ("MELM's package", "melm/__init__.py", '"""\n', '"""\n\nEDITED = 1\n', {"melm": (AUGMENT,)}),
    ("a profile value S5 reads", "configs/profiles/paper.yaml", "  top_k: 10\n", "  top_k: 11\n",
     {"aclm": (S5,)}),
    ("a method file value S6 reads", "configs/methods/aclm.yaml", "drop_entity_free: true",
     "drop_entity_free: false", {"aclm": (S6,)}),
    ("how the run's dataset is read (datasets.yaml)", "configs/datasets.yaml",
     "sample/en:\n  language: en\n", "sample/en:\n  language: en\n  empty_token: _\n", EVERY),
    # --- must re-run nothing ----------------------------------------------------------------------------------
    ("a method added to the table", "aclm/base/registry.py", "    Method(\"aclm\", ",
     "    Method(\"aclm_copy\", \"a copy\", \"aclm\", generator=\"generator\", decoding=\"generation\"),\n"
     "    Method(\"aclm\", ", NONE),
    ("LwTR's title in the table", "aclm/base/registry.py", 'title="LwTR"', 'title="LwTR (Dai & Adel)"', NONE),
    ("a key's help text", "aclm/base/config.py", 'key("R: generations per training sentence", check=ROUNDS)',
     'key("R: how many generations each training sentence gets", check=ROUNDS)', NONE),
    ("a key's choices, its value kept", "aclm/base/config.py", 'choices=("strict", "released"))',
     'choices=("strict", "released", "lenient"))', NONE),
    ("a key's bound", "aclm/base/config.py", "check=(lambda v: 0 < v <= 1, \"is LwTR's",
     "check=(lambda v: 0 < v <= 0.99, \"is LwTR's", NONE),
    ("a new key at a default that keeps behaviour", "aclm/base/config.py",
     '    mixner: MixnerConfig = section(',
     '    spare: int = key("a new key", default=3)\n    mixner: MixnerConfig = section(', NONE),
    ("a log line in a step", "aclm/steps/generation.py", '    counts["mixed"] =',
     '    log.info("%d jobs", len(jobs))\n    counts["mixed"] =', NONE),
    ("a docstring and a comment in a step", "aclm/steps/keywords.py", "\ndef stopwords(",
     "\n# a comment\ndef stopwords(", NONE),
    ("the progress bars", "aclm/base/progress.py", "\ndef show_progress(", "\nEDITED = 1\n\n\ndef show_progress(",
     NONE),
    ("TensorBoard", "aclm/base/tensorboard.py", 'FOLDER = "tensorboard"', 'FOLDER = "tb"', NONE),
    ("the log setup", "aclm/base/logs.py", 'datefmt="%H:%M:%S"', 'datefmt="%H:%M"', NONE),
    ("the signal handling", "aclm/base/signals.py", "\ndef check_interrupted(",
     "\nEDITED = 1\n\n\ndef check_interrupted(", NONE),
    ("the locks", "aclm/engine/locks.py", "WAIT_REPORT_S = 60.0", "WAIT_REPORT_S = 30.0", NONE),
    ("the GPU ledger", "aclm/engine/memory.py", "POLL_S = 2.0", "POLL_S = 1.0", NONE),
    ("the engine itself", "aclm/engine/stages.py", "\ndef stamp(", "\nEDITED = 1\n\n\ndef stamp(", NONE),
    ("where stages write", "aclm/stages/declare.py", "\ndef place(", "\nEDITED = 1\n\n\ndef place(", NONE),
    ("the scripts' driver", "aclm/run/cli.py", "re-run even if the outputs are current",
     "re-run even when current", NONE),
    ("the chain's progress line", "aclm/run/estimates.py", "no estimate yet for the rest", "no guess yet", NONE),
    ("tools/", "tools/benchmark.py", "\ndef ", "\nEDITED = 1\n\n\ndef ", NONE),
    ("the tables", "aclm/tables/aggregate.py", "\ndef ", "\nEDITED = 1\n\n\ndef ", NONE),
    ("the grids", "aclm/experiments/grid.py", "\ndef ", "\nEDITED = 1\n\n\ndef ", NONE),
]


def checkout_copy(where: Path) -> Path:
    """The project's code and configs, with models and the sample data linked, not copied."""
    for name in ("aclm", "baselines", "melm", "configs", "scripts", "tools"):
        shutil.copytree(PROJECT_ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("models", "data"):
        (where / name).symlink_to(PROJECT_ROOT / name)
    return where


def identities(code: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *CHAINS], cwd=code, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code)}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def reruns(before: dict, after: dict, method: str) -> set[str]:
    """The stages of ``method`` whose identity changed, and every stage that reads one of them."""
    stages, found = after[method], set()
    for name, stage in stages.items():                       # in chain order: what a stage reads comes first
        own = differences(before[method][name]["identity"], stage["identity"], after["defaults"])
        upstream = [s for s in stages if s in found] if "every earlier" in stage["reads_from"] else \
            [s for s in stage["reads_from"] if s in found]
        if own or upstream:
            found.add(name)
    return found


def onward(stages: dict, first: tuple[str, ...]) -> set[str]:
    """``first`` and every stage of the chain that reads one of them, directly or not."""
    found = {name for name in first if name in stages}
    for name, stage in stages.items():
        reads = [s for s in stages if s in found] if "every earlier" in stage["reads_from"] else stage["reads_from"]
        if any(s in found for s in reads):
            found.add(name)
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_models):
    code = checkout_copy(tmp_path_factory.mktemp("edits"))
    return code, identities(code)


def test_the_edit_table_holds_at_least_25_edits_both_ways():
    assert len(EDITS) >= 25
    assert sum(1 for *_, expected in EDITS if expected == NONE) >= 12
    assert sum(1 for *_, expected in EDITS if expected != NONE) >= 12


@pytest.mark.slow          # a fresh process per edit: about 80 s in all
@pytest.mark.parametrize("what,file,old,new,expected", EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_reruns_exactly_the_stages_it_can_change(project, what, file, old, new, expected):
    code, before = project
    path = code / file
    original = path.read_text(encoding="utf-8")
    assert old in original, f"{file} no longer holds {old!r}: update the edit table"
    try:
        path.write_text(original.replace(old, new, 1) if old else new + original, encoding="utf-8")
        after = identities(code)
    finally:
        path.write_text(original, encoding="utf-8")
    for method in CHAINS:
        want = onward(after[method], expected.get(method, ()))
        assert reruns(before, after, method) == want, (what, method)

