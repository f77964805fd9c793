"""The warm-started BERT2BERT generator (tools/warm_start.py) in the chain: its tokenizer gives words back, label
tokens join both halves, and S4, S5 (every ``generation.constrained`` mode) and MulDA run with a generator that
has no language codes.  The model here is the untrained warm start (MiniLM twice, fresh cross-attention): what
it writes means nothing, only that the chain carries it; tests/test_mini_generator.py checks what the trained
one writes."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoTokenizer


from aclm.base.config import load_config
from aclm.base.tokens import add_tokens
from aclm.stages import layout
from aclm.run.chain import run_method
from aclm.steps.generator import language_code, target_end, target_start
from aclm.steps.labels import parse_generation
from tools.warm_start import SPEC, warm_model, warm_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return warm_tokenizer()


@pytest.fixture(scope="module")
def untrained(tmp_path_factory, tokenizer):
    """The warm start before any denoising, saved as a generator folder."""
    folder = tmp_path_factory.mktemp("warm") / "bert2bert"
    warm_model(tokenizer, SPEC, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_words_with_punctuation_come_back_as_the_same_words(tokenizer):
    words = "king's r&b 4.8 don't kh-8 m.o.d. ( london ) .".split()
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids).split() == words
    assert tokenizer.decode(tokenizer("café")["input_ids"], skip_special_tokens=True) == "cafe"  # accents go


def test_the_saved_tokenizer_keeps_its_whitespace_splitting(untrained):
    reloaded = AutoTokenizer.from_pretrained(untrained)
    assert reloaded.decode(reloaded("king's r&b", add_special_tokens=False)["input_ids"]) == "king's r&b"


def test_without_language_codes_targets_start_with_cls_and_end_with_sep(tokenizer):
    assert language_code(tokenizer, "en") is None
    assert (target_start(tokenizer), target_end(tokenizer)) == (tokenizer.cls_token_id, tokenizer.sep_token_id)


def test_mbart_targets_start_with_the_language_code(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models / "mbart-large-50")
    tokenizer.src_lang = tokenizer.tgt_lang = language_code(tokenizer, "de")
    assert target_start(tokenizer) == tokenizer.convert_tokens_to_ids("de_DE")
    assert target_end(tokenizer) == tokenizer.eos_token_id


def test_a_label_token_joins_the_encoder_and_the_decoder_starting_from_its_words(tokenizer):
    model = warm_model(tokenizer, SPEC, seed=0)
    words = tokenizer("person begin", add_special_tokens=False)["input_ids"]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)   # a copy to add to
    added = add_tokens(model, tokenizer, ["<b-per>"], {"<b-per>": "person begin"})
    new = tokenizer.convert_tokens_to_ids("<b-per>")
    assert added == ["<b-per>"]
    for half in (model.encoder, model.decoder):
        table = half.get_input_embeddings().weight
        assert table.shape[0] == len(tokenizer)
        assert torch.allclose(table[new], table[words].mean(dim=0))
    assert model.decoder.get_output_embeddings().weight.shape[0] == len(tokenizer)   # the LM head grew with it


@pytest.mark.slow
@pytest.mark.parametrize("constrained", ["off", "labels", "entities"])
def test_s4_and_s5_run_with_the_warm_generator(untrained, tiny_models, tmp_path, constrained):
    cfg = load_config(["profile=tiny", "method=aclm", f"generator.model={untrained}", "generator.epochs=1",
                       "generation.rounds=1", "ner.epochs=1", f"generation.constrained={constrained}",
                       f"run_dir={tmp_path}"])
    stages = run_method(cfg, until=layout.S5)
    rows = [json.loads(line) for line in (stages[layout.S5] / layout.GENERATIONS).read_text().splitlines()]
    types = {tag[2:] for row in rows if "tags" in row for tag in row["tags"] if tag != "O"}
    kept = [r for r in rows if r["status"] == "kept"]
    assert rows and all(parse_generation(r["generation"], types or ["X"]).tokens == r["tokens"] for r in kept)
    if constrained != "off":     # the grammar leaves the untrained model only well-formed text
        assert len(kept) >= len(rows) // 2, [r["generation"] for r in rows[:5]]


@pytest.mark.slow
def test_mulda_runs_with_the_warm_generator(untrained, tiny_models, tmp_path):
    cfg = load_config(["profile=tiny", "method=mulda", f"mulda.model={untrained}", "mulda.epochs=1",
                       "generation.rounds=1", "ner.epochs=1", "mulda.constrained=labels", f"run_dir={tmp_path}"])
    stages = run_method(cfg, until=layout.AUGMENT)
    facts = json.loads((stages[layout.AUGMENT] / "_stage.json").read_text())["facts"]
    assert facts["generated"] == 60                # R x the 60 gold sentences, sampled and screened
