"""The LLM method: gold sentences shown in a prompt, new ones written under the label grammar (a tiny random
GPT-2 as the model: no chat template, byte-level pieces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from aclm.base.augmentation import Gold
from aclm.base.config import ConfigError, load_config
from aclm.base.data import TaggedSentence, read_conll
from aclm.base.paths import PROJECT_ROOT
from aclm.steps.screening import COUNT_KEYS, MalformedGeneration
from baselines.linearize import parse
import baselines.llm
from baselines.llm import PROMPTS, augment, demonstrations, instruction, prompt_text, setup, token_classes, write

GPT2 = PROJECT_ROOT / "models" / "tiny" / "gpt2"
SAMPLE = PROJECT_ROOT / "data" / "sample" / "en"
TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
TAGS = sorted(f"{p}-{t}" for t in TYPES for p in "BI")
CPU = torch.device("cpu")


def ending(path, tags, device, tag_boost: float = 0.0):
    """:func:`setup`, with the end of sequence's logit 1 higher (a random LM almost never ends a sentence) and
    the tags' ``tag_boost`` higher (nor writes a tag)."""
    model, tokenizer = setup(path, tags, device)
    tag_ids = tokenizer.convert_tokens_to_ids(list(tags))

    def likelier_end(module, inputs, logits):
        logits[..., tokenizer.eos_token_id] += 1.0
        logits[..., tag_ids] += tag_boost
        return logits

    model.get_output_embeddings().register_forward_hook(likelier_end)
    return model, tokenizer


@pytest.fixture(scope="module")
def lm(tiny_models):
    return ending(str(GPT2), TAGS, CPU, tag_boost=1.5)


def test_tags_are_whole_tokens_and_no_word_token_breaks_a_line(lm):
    model, tokenizer = lm
    assert "B-PER" in tokenizer.tokenize("went B-PER john") and tokenizer.tokenize("B-PER") == ["B-PER"]
    assert model.get_input_embeddings().num_embeddings >= len(tokenizer)
    fresh = setup(str(GPT2), [], CPU)[0].get_input_embeddings().weight
    spelled = AutoTokenizer.from_pretrained(GPT2)(" I-CW", add_special_tokens=False)["input_ids"]
    assert len(spelled) > 1 and torch.allclose(model.get_input_embeddings().weight[tokenizer.convert_tokens_to_ids(
        "I-CW")], fresh[spelled].mean(dim=0))                       # the tag reads as its spelling
    classes = token_classes(tokenizer, TAGS)
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    allowed = (classes.word | classes.blank).nonzero().flatten().tolist()
    assert allowed and not any("\n" in texts[i] or "\x00" in texts[i] for i in allowed)
    assert "\n" in "".join(texts)                                  # there were line breaks to leave out
    assert sorted(tokenizer.convert_ids_to_tokens(classes.label.nonzero().flatten().tolist())) == TAGS
    assert not classes.word[tokenizer.eos_token_id] and classes.eos == tokenizer.eos_token_id


def test_each_gold_sentence_is_shown_in_r_prompts_beside_others_of_its_language():
    languages = ["en"] * 4 + ["de"] * 2
    shown = demonstrations(languages, shots=3, rounds=2, seed=0)
    assert len(shown) == 12
    for i in range(6):
        own = shown[2 * i:2 * i + 2]
        assert all(i in js and len(set(js)) == len(js) == min(3, languages.count(languages[i])) for js in own)
        assert all({languages[j] for j in js} == {languages[i]} for js in own)
    assert demonstrations(languages, 3, 2, seed=0) == shown != demonstrations(languages, 3, 2, seed=1)


def test_the_prompt_names_the_language_and_types_and_shows_the_linearized_examples():
    examples = [TaggedSentence("john smith went".split(), ["B-PER", "I-PER", "O"]),
                TaggedSentence(["berlin"], ["B-LOC"])]
    text = instruction("{language}: {types}\n{examples}", examples, "de", ["LOC", "PER"], {"PER": "person"})
    assert text == "German: LOC (loc), PER (person)\nB-PER john I-PER smith went\nB-LOC berlin"


def test_a_prompt_without_examples_is_refused_on_load():
    with pytest.raises(ConfigError, match="llm.prompt"):
        load_config(["profile=tiny", "method=llm", "llm.prompt=write a sentence"])
    paper = load_config(["profile=paper", "method=llm"])
    assert paper.llm.rounds == 5 and paper.postprocess.drop_entity_free          # R of every baseline; S6 as ACLM's


def responses(lm) -> list:
    model, tokenizer = lm
    cfg = load_config(["profile=tiny", "method=llm", "llm.max_new_tokens=10"]).llm
    gold = read_conll(SAMPLE / "train.conll")[:6]
    prompts = [prompt_text(tokenizer, instruction(cfg.prompt, [s], "en", TYPES, {})) for s in gold for _ in "abc"]
    tag_ids = set(tokenizer.convert_tokens_to_ids(TAGS))
    return write(model, tokenizer, prompts, cfg, token_classes(tokenizer, TAGS), tag_ids, 0, CPU)


def parses(words: list[str]) -> bool:
    try:
        parse(words, set(TAGS))
    except MalformedGeneration:
        return False
    return True


def test_every_response_parses_under_the_grammar_and_not_without_it(lm, monkeypatch):
    written = responses(lm)
    assert len(written) == 18 and all(parses(r.sample[0]) for r in written)
    assert {r.sample[1] for r in written} == {True, False}         # some ended, some ran to the limit
    assert sum(r.tag_tokens for r in written) >= 5                 # tags were written
    assert all(r.tag_tokens == sum(w in TAGS for w in r.sample[0]) for r in written)   # as whole tokens

    monkeypatch.setattr(baselines.llm, "sampling_arguments", lambda grammar, top_k, num_beams: {"top_k": top_k})
    assert not all(parses(r.sample[0]) for r in responses(lm))     # free sampling breaks the grammar


def run(tmp_path: Path, seed: int, monkeypatch) -> tuple[list[dict], dict, str]:
    monkeypatch.setattr(baselines.llm, "setup", ending)
    cfg = load_config(["profile=tiny", "method=llm", "llm.rounds=2", f"seed={seed}"])
    train = read_conll(SAMPLE / "train.conll")[:8]
    work = tmp_path / f"seed{seed}-{len(list(tmp_path.iterdir()))}"
    work.mkdir()
    rows, counts = augment(cfg, Gold(train, [], TYPES, "en", ["en"] * 8, [], CPU, work))
    return rows, counts, (work / PROMPTS).read_text()


def test_augment_saves_prompts_and_responses_and_is_seeded(tmp_path, tiny_models, monkeypatch):
    rows, counts, prompts = run(tmp_path, seed=1, monkeypatch=monkeypatch)
    lines = [json.loads(line) for line in prompts.splitlines()]
    assert len(lines) == counts["generated"] == 2 * 8               # R x N
    assert set(lines[0]) == {"sample_index", "shown", "prompt", "response", "finished"}
    assert all(counts[k] == 0 for k in COUNT_KEYS if k.startswith("malformed_") and k != "malformed_truncated")
    assert counts["kept"] == len(rows) > 0
    assert sum(counts[k] for k in COUNT_KEYS if k != "generated") == counts["generated"]
    assert counts["spelled_tags"] == 0 and 0 <= counts["responses_with_tags"] <= counts["generated"]
    assert all(row["sources"] == [] and len(row["tokens"]) == len(row["tags"]) for row in rows)
    assert run(tmp_path, 1, monkeypatch) == (rows, counts, prompts) != run(tmp_path, 2, monkeypatch)


def test_a_prompt_longer_than_the_model_fails_naming_the_keys(lm):
    model, tokenizer = lm
    cfg = load_config(["profile=tiny", "method=llm", "llm.max_new_tokens=250"]).llm
    with pytest.raises(ValueError, match="llm.shots or a shorter llm.prompt"):
        write(model, tokenizer, ["B-PER john went home"], cfg, token_classes(tokenizer, TAGS), set(), 0, CPU)
