"""Config composition, overrides and validation."""

import pytest

from aclm.config import ConfigError, config_hash, load_config


def test_paper_profile_is_the_default():
    cfg = load_config()
    assert cfg.profile == "paper" and cfg.method == "gold_only"
    assert cfg.ner.model == "xlm-roberta-large" and cfg.generator.model == "facebook/mbart-large-50"
    assert cfg.keywords.layers == "last4" and cfg.keywords.p == 0.3
    assert cfg.generation.mixner.mode == "paper" and cfg.generation.mixner.beta == 0.7


def test_reference_code_profile_overrides_the_paper():
    cfg = load_config(["profile=reference_code"])
    assert cfg.keywords.layers == "8-11"
    assert cfg.generator.lr == pytest.approx(5.6e-5) and cfg.generator.weight_decay == 0.01
    assert cfg.generation.mixner.mode == "code" and cfg.postprocess.consistency_filter is True
    assert cfg.generation.rounds == 5  # inherited from paper


def test_method_file_and_command_line_overrides():
    cfg = load_config(["method=aclm_random", "keywords.p=0.5", "gold=full", "test_datasets=[multiconer/hi]"])
    assert cfg.keywords.selection == "random" and cfg.keywords.p == 0.5
    assert cfg.gold == "full" and list(cfg.test_datasets) == ["multiconer/hi"]
    assert load_config(["method=aclm_random", "keywords.selection=attention"]).keywords.selection == "attention"


def test_extra_config_file(tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text("inherits: []\nner:\n  epochs: 7\n")
    assert load_config(config_files=[str(extra)]).ner.epochs == 7


@pytest.mark.parametrize("overrides,message", [
    (["ner.lr=fast"], "ner.lr"),
    (["nonsense=1"], "nonsense"),
    (["method=unknown"], "unknown method"),
    (["ner.tagger=crf"], "ner.tagger='crf' is not one of"),
    (["gold=many"], "gold='many'"),
    (["keywords.p=1.5"], r"keywords.p=1.5"),
    (["profile=nope"], "config file not found"),
    (["justaword"], "key=value"),
])
def test_invalid_configs_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


def test_hash_changes_with_values_only():
    a, b = load_config(), load_config()
    assert config_hash(a.ner) == config_hash(b.ner)
    assert config_hash(a.ner) != config_hash(load_config(["ner.epochs=3"]).ner)


def test_wikineural_tagger_file():
    cfg = load_config(config_files=["configs/taggers/wikineural.yaml"])
    assert cfg.ner.tagger == "bilstm_crf" and cfg.ner.layer_mean and cfg.ner.subtoken_pooling == "mean"
    assert cfg.ner.lr == pytest.approx(1e-3) and cfg.ner.hidden_size == 512


def test_unknown_dataset_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown dataset 'multiconer/xx'"):
        load_config(["test_datasets=[multiconer/xx]"])
