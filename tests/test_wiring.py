"""How stages are wired: each sees only the config it declares, fingerprints cover exactly that and
the content of its inputs, a grid cell is done only when its chain is current, and a new method is
one module, one table entry and one YAML file."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from omegaconf.errors import ConfigAttributeError

from aclm.base import registry
from aclm.base.io import read_json
from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import Cell
from aclm.stages import layout
from aclm.run.chain import run_method
from aclm.stages.layout import RunLayout
from aclm.engine import STAMP
from aclm.stages.declare import stage
from conftest import FAST


def stamps(cfg, *names) -> dict[str, str]:
    run = RunLayout.of(cfg)
    return {n: (run.stage(n) / STAMP).read_text() for n in names if (run.stage(n) / STAMP).exists()}


@pytest.fixture
def sample_as_multiconer(tmp_path):
    """The bundled English sample laid out as a data folder under the multiconer/en entry."""
    for language in ("en", "de"):
        folder = tmp_path / "data" / "multiconer" / language
        folder.mkdir(parents=True)
        for split, name in (("train", "train_full"), ("dev", "dev"), ("test", "test")):
            shutil.copy(PROJECT_ROOT / "data" / "sample" / language / f"{split}.conll", folder / f"{name}.conll")
    return tmp_path / "data"


def test_a_stage_sees_only_the_config_it_reads(fast, tmp_path):
    cfg = fast(tmp_path, "method=lwtr")

    @stage("probe", keys=("lwtr", "seed"))
    def probe(c, out):
        assert c.lwtr.p == 0.3 and c.seed == 1 and c.data_dir          # declared keys and where data is
        return {"daga": c.daga.epochs}                                   # undeclared: must raise

    with pytest.raises(ConfigAttributeError):
        probe(cfg)
    assert not (RunLayout.of(cfg).stage("probe") / STAMP).exists()


def test_changing_a_key_melm_reads_reruns_melm_and_nothing_before_it(fast, tmp_path):
    cfg = fast(tmp_path, "method=melm")
    run_method(cfg)
    names = (layout.DATA, layout.S1, layout.AUGMENT, layout.S6, layout.S7, layout.S7_EVAL)
    before = stamps(cfg, *names)
    run_method(cfg)
    assert stamps(cfg, *names) == before                                 # current: no work
    changed = fast(tmp_path, "method=melm", "generator.label_token_init.PER=human")
    run_method(changed)
    after = stamps(cfg, *names)
    assert after[layout.DATA] == before[layout.DATA] and after[layout.S1] == before[layout.S1]
    assert all(after[n] != before[n] for n in (layout.AUGMENT, layout.S6, layout.S7, layout.S7_EVAL))
    unrelated = fast(tmp_path, "method=melm", "generator.label_token_init.PER=human", "daga.epochs=7",
                     "keywords.p=0.5", "lwtr.p=0.9")
    run_method(unrelated)
    assert stamps(cfg, *names) == after                                  # keys MELM does not read


def test_editing_a_test_file_reruns_only_the_scoring(fast, tmp_path, sample_as_multiconer):
    cfg = fast(tmp_path, "dataset=multiconer/en", "gold=full", f"data_dir={sample_as_multiconer}")
    run_method(cfg)
    names = (layout.DATA, layout.S1, layout.S1_EVAL)
    before = stamps(cfg, *names)
    test_file = sample_as_multiconer / "multiconer" / "en" / "test.conll"
    test_file.write_text(test_file.read_text(encoding="utf-8") + "\nextra\tO\nline\tO\n", encoding="utf-8")
    run_method(cfg)
    after = stamps(cfg, *names)
    assert after[layout.DATA] == before[layout.DATA] and after[layout.S1] == before[layout.S1]
    assert after[layout.S1_EVAL] != before[layout.S1_EVAL]
    result = read_json(RunLayout.of(cfg).result_path)
    assert result["sizes"]["test:multiconer/en"] == len(test_file.read_text().strip().split("\n\n"))


def test_a_grid_cell_is_done_only_when_its_chain_is_current(fast, tmp_path, sample_as_multiconer):
    setting = ["dataset=multiconer/en", "gold=full", f"data_dir={sample_as_multiconer}"]
    cfg = fast(tmp_path, *setting)
    run_method(cfg)                                                      # a run made with other settings
    fast_overrides = [o for o in FAST if not o.startswith("profile=")]
    cell = Cell("tiny", "multiconer/en", "full", "gold_only", 1, str(tmp_path),
                overrides=(*fast_overrides, f"data_dir={sample_as_multiconer}", "test_datasets=[multiconer/de]"))
    assert cell.layout.result_path.exists() and not cell.is_done()
    s1 = stamps(cfg, layout.S1)
    run_method(cell.config())
    assert cell.is_done() and stamps(cfg, layout.S1) == s1               # only the scoring re-ran
    assert "multiconer/de" in read_json(cell.layout.result_path)["test"]


TOY_MODULE = '''
from aclm.base.augmentation import kept_row


def augment(c, gold):
    """Every gold sentence, repeated c.toy.copies times."""
    rows = [kept_row(s, [i], round=r) for r in range(c.toy.copies) for i, s in enumerate(gold.train)]
    return rows, {"generated": len(rows), "kept": len(rows)}
'''


def test_a_toy_method_added_as_the_readme_says(fast, tmp_path, monkeypatch):
    (tmp_path / "toy_method.py").write_text(TOY_MODULE)                  # 1. one module
    monkeypatch.syspath_prepend(str(tmp_path))
    yaml = tmp_path / "toy.yaml"                                         # 3. its YAML, with its own section
    yaml.write_text("toy:\n  copies: 2\n")
    monkeypatch.setitem(registry.METHODS, "toy", registry.Method(      # 2. one table entry
        "toy", "repeats the gold data", "augment", keys=("toy",), augment="toy_method:augment", config_file=yaml))
    cfg = fast(tmp_path / "runs", "method=toy")
    done = run_method(cfg)
    result = read_json(done[layout.S7_EVAL] / "result.json")
    assert result["method"] == "toy" and result["augmentation"]["generation"]["generated"] == 2 * 60
    assert result["config"]["toy"] == {"copies": 2}
    assert run_method(fast(tmp_path / "runs", "method=toy", "toy.copies=1"))[layout.AUGMENT] == done[layout.AUGMENT]
    assert read_json(done[layout.AUGMENT] / STAMP)["facts"]["generated"] == 60     # the override re-ran it
    assert Cell("tiny", "sample/en", "full", "toy", 1, "runs").phase == 1


def test_the_method_table_lists_every_method():
    out = subprocess.run([sys.executable, "scripts/run_method.py", "--list"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, check=True).stdout
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == list(registry.METHODS)
    assert "needs aclm" in next(line for line in out.splitlines() if line.startswith("wikineural"))
    assert "  [needs aclm]" in next(line for line in out.splitlines() if line.startswith("gold_only_budget"))


def test_every_methods_augmenter_and_file_list_load_offline():
    """The method table names functions by ``module:function``: each must import and be callable."""
    from aclm.base import registry

    augmenting = [m for m in registry.METHODS.values() if m.generation == "augment"]
    assert {m.name for m in augmenting} >= {"lwtr", "daga", "mulda", "melm", "wikineural"}
    for method in augmenting:
        assert callable(method.augmenter()), method.name
        assert method.input_files() is None or callable(method.input_files()), method.name


def test_a_duplicate_method_name_is_refused():
    from aclm.base import registry

    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.Method("lwtr", "another LwTR", "none"))
    assert registry.get("lwtr").summary == "label-wise token replacement"


def test_each_methods_chain_is_declared_as_data():
    """The chain is a list of steps: a stage, the earlier steps it reads; run by one loop (aclm.run.chain)."""
    from aclm.base.config import load_config
    from aclm.run.chain import chain

    def steps(*overrides):
        return {s.name: s for s in chain(load_config(["profile=tiny", *overrides]))}

    gold_only = steps("method=gold_only")
    assert list(gold_only) == [layout.DATA, layout.S1, layout.S1_EVAL] and gold_only[layout.S1_EVAL].scores
    aclm = steps("method=aclm")
    assert list(aclm) == [layout.DATA, layout.S1, layout.S2, layout.S3, layout.S4, layout.S5, layout.S6, layout.S7,
                          layout.S7_EVAL]
    assert list(aclm[layout.S5].inputs) == [layout.DATA, layout.S3, layout.S4] and aclm[layout.S5].frees == layout.S4
    assert aclm[layout.S6].inputs == {layout.DATA: layout.DATA, "generations": layout.S5}
    assert not aclm[layout.S7_EVAL].frees                                                        # a single run
    assert steps("method=aclm", "storage.keep_final_tagger=false")[layout.S7_EVAL].frees == layout.S7   # a grid's
    assert not steps("method=aclm", "storage.keep_models=true")[layout.S5].frees
    melm = steps("method=melm")                             # its consistency filter reads the gold tagger
    assert melm[layout.S6].inputs == {layout.DATA: layout.DATA, "generations": layout.AUGMENT, layout.S1: layout.S1}
    assert steps("method=wikineural")[layout.AUGMENT].needs == ("aclm",)
    for method in registry.METHODS:                        # every step reads only steps before it
        names = list(steps(f"method={method}"))
        assert all(names.index(r) < names.index(s.name) for s in steps(f"method={method}").values()
                   for r in s.inputs.values())


@pytest.mark.slow
def test_list_stages_prints_a_chain_and_a_stage_script_refuses_a_stage_its_method_lacks(tmp_path):
    listed = subprocess.run([sys.executable, "scripts/run_method.py", "--list-stages", "method=lwtr", "profile=tiny"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert listed[0] == "lwtr (augment: baselines.lwtr:augment_gold):"
    stages = [line.split()[0] for line in listed[1:] if not line.lstrip().startswith("keys:")]
    assert stages == [layout.DATA, layout.S1, layout.AUGMENT, layout.S6, layout.S7, layout.S7_EVAL]
    assert "keys: method, dataset, seed, lwtr, generation.rounds" in listed[listed.index(
        next(line for line in listed if line.split()[0] == layout.AUGMENT)) + 1]
    refused = subprocess.run([sys.executable, "scripts/keywords.py", "method=lwtr", "profile=tiny",
                              f"run_dir={tmp_path}"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert refused.returncode == 1 and "has no stage s2_keywords" in refused.stderr
    assert not any(tmp_path.iterdir())                     # refused before anything ran


def test_a_chain_wired_to_a_later_stage_or_a_wrong_argument_fails_when_built():
    from aclm.run.chain import Step, WiringError, wired
    from aclm.stages.declare import stage
    from aclm.stages.data import data_stage
    from aclm.stages.keywords import keywords_stage
    from aclm.stages.ner import s1_stage
    from aclm.stages.templates import templates_stage

    s2 = Step(layout.S2, keywords_stage)                                 # wired by its builder's parameters
    assert s2.inputs == {layout.DATA: layout.DATA, layout.S1: layout.S1} and not s2.scores
    with pytest.raises(WiringError, match="s2_keywords takes s1_ner, which no step before it makes"):
        wired([Step(layout.DATA, data_stage), s2, Step(layout.S1, s1_stage)])
    assert wired([Step(layout.DATA, data_stage), Step(layout.S1, s1_stage), s2])[-1] is s2
    with pytest.raises(WiringError, match=r"templates_stage takes \['s2_keywords'\]; it renames \['data'\]"):
        Step(layout.S3, templates_stage, {layout.DATA: layout.DATA})     # a parameter the builder does not take
    with pytest.raises(WiringError, match=r"keywords_stage takes \['data', 's1_ner'\]; nothing gives \['s1_ner'\]"):
        Step(layout.S2, keywords_stage, {layout.S1: None})               # one it needs, given by none

    def build(config, out, gold, s1_ner):                                # any name for the config
        return {}

    own = Step("own", stage("own")(build), {"gold": layout.DATA})
    assert own.inputs == {"gold": layout.DATA, layout.S1: layout.S1}
