"""Run folders named after what the overrides change, so that no run replaces another's results."""

from __future__ import annotations

import pytest

from aclm.base.datasets import run_spec
from aclm.run.naming import folder_name, run_config


@pytest.mark.parametrize("words, setting, variant", [
    (["method=aclm", "generator.epochs=3"], "", "generator.epochs=3"),          # only S4 on reads it
    (["method=aclm", "ner.epochs=3"], "ner.epochs=3", ""),                      # S1: the setting's
    (["method=aclm", "storage.keep_models=true"], "", ""),                      # no stage computes with it
    (["method=gold_only", "generator.epochs=3"], "", ""),                       # Gold-only has no generator
    # keys a method reads through the profile's links (mulda.epochs: ${generator.epochs}, ...)
    (["method=mulda", "generator.epochs=3"], "", "generator.epochs=3"),
    (["method=melm", "generation.rounds=2"], "", "generation.rounds=2"),
    (["method=daga", "generation.constrained=labels"], "", "generation.constrained=labels"),
])
def test_an_override_names_the_folder_of_the_stages_it_changes(words, setting, variant):
    cfg = run_config(["profile=tiny", *words])
    assert (cfg.setting_variant, cfg.variant) == (setting, variant)


def test_a_config_file_names_what_it_and_the_files_it_inherits_change(tmp_path):
    tagger = tmp_path / "tagger.yaml"
    tagger.write_text("inherits: configs/taggers/wikineural.yaml\nner: {epochs: 2}\n")
    plain = run_config(["profile=tiny", "ner.epochs=2"])
    inherited = run_config(["profile=tiny"], [str(tagger)])
    assert plain.setting_variant == "ner.epochs=2"
    assert inherited.setting_variant not in ("", plain.setting_variant)     # the inherited tagger keys count


def test_values_made_safe_for_a_path_still_name_two_folders():
    assert folder_name({"ner.epochs": 2}) == "ner.epochs=2"
    a, b = folder_name({"ner.model": "/m/a/enc"}), folder_name({"ner.model": "/m/a_enc"})
    assert a.startswith("ner.model=_m_a_enc+") and b.startswith("ner.model=_m_a_enc+") and a != b


def test_the_language_given_for_a_dataset_folder_holds(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "train.conll").write_text("the\tO\nman\tO\nwas\tO\nparis\tB-LOC\n\n" * 20)
    cfg = run_config([f"dataset={folder}", "language=de", "ner.epochs=2"])
    assert cfg.language == "de" and run_spec(cfg).language == "de"
