from pathlib import Path

import pytest
import torch

from aclm.base.augmentation import Gold
from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, read_conll
from aclm.base.paths import PROJECT_ROOT
from tools.tiny_models import build_tiny_models
from aclm.steps.screening import COUNT_KEYS, zero_counts
from baselines.mulda import augment, decode, sample, screen, setup, split_output, training_pair

MBART = PROJECT_ROOT / "models" / "tiny" / "mbart-large-50"
SAMPLE = PROJECT_ROOT / "data" / "sample" / "en"
TAGS = ["B-CW", "B-PER", "I-CW", "I-PER"]


def s(text: str, tags: str) -> TaggedSentence:
    return TaggedSentence(text.split(), tags.split())



@pytest.fixture(scope="module")
def lm():
    if not MBART.is_dir():
        build_tiny_models()
    return setup(str(MBART), "en", TAGS, torch.device("cpu"))


def word_ids(tokenizer, word: str) -> list[int]:
    return tokenizer(word, add_special_tokens=False)["input_ids"]


def test_tag_words_are_single_new_tokens(lm):
    model, tokenizer = lm
    fresh = setup(str(MBART), "en", [])[1]
    assert all(len(fresh.tokenize(tag)) > 1 for tag in TAGS)          # split before setup
    for tag in TAGS:
        assert tokenizer.tokenize(tag) == [tag]
        assert tokenizer.convert_tokens_to_ids(tag) >= len(fresh)
    assert "B-PER" in tokenizer.tokenize("went B-PER john")
    assert model.get_input_embeddings().num_embeddings == len(tokenizer) == len(fresh) + len(TAGS)


def test_tag_tokens_start_from_their_type_and_position_words():
    model, tokenizer = setup(str(MBART), "en", TAGS, init_words={"PER": "person", "CW": "creative work"})
    fresh_model, fresh = setup(str(MBART), "en", [])
    table = fresh_model.get_input_embeddings().weight
    embeddings = model.get_input_embeddings().weight
    for tag, words in [("B-PER", "person begin"), ("I-PER", "person inside"), ("I-CW", "creative work inside")]:
        expected = table[word_ids(fresh, words)].mean(dim=0)
        assert torch.allclose(embeddings[tokenizer.convert_tokens_to_ids(tag)], expected)


def test_mulda_reads_its_own_config_section():
    from aclm.base import registry
    from aclm.engine.identity import hashed, view

    keys = ("method", "dataset", "seed", *registry.get("mulda").keys)
    cfg = load_config(["profile=tiny", "method=mulda"])
    seen = hashed(view(cfg, keys))
    # by default the generator's model and recipe, and the ACLM decoding's R, top-k and length
    assert seen["mulda"]["model"] == cfg.generator.model and seen["mulda"]["lr"] == cfg.generator.lr
    assert (seen["mulda"]["rounds"], seen["mulda"]["top_k"]) == (cfg.generation.rounds, cfg.generation.top_k)
    assert hashed(view(load_config(["profile=tiny", "method=mulda", "mulda.top_k=3"]), keys)) != seen
    unread = load_config(["profile=tiny", "method=mulda", "generation.mixner.beta=0.1", "generation.num_beams=3"])
    assert hashed(view(unread, keys)) == seen                   # ACLM's own decoding settings do not reach MulDA


def test_training_pair_is_language_code_then_linearized_target(lm):
    _, tokenizer = lm
    pair = training_pair(s("john smith saw titanic", "B-PER I-PER O B-CW"), tokenizer, max_length=64)
    code, eos = tokenizer.convert_tokens_to_ids("en_XX"), tokenizer.eos_token_id
    tag = tokenizer.convert_tokens_to_ids
    expected = ([code, tag("B-PER")] + word_ids(tokenizer, "john") + [tag("I-PER")] + word_ids(tokenizer, "smith")
                + word_ids(tokenizer, "saw") + [tag("B-CW")] + word_ids(tokenizer, "titanic") + [eos])
    assert pair == {"input_ids": [code], "attention_mask": [1], "labels": expected}


def test_split_output_skips_the_start_and_stops_at_the_first_eos():
    eos, pad, code = 2, 1, 707
    assert split_output([eos, code, 10, 11, eos, pad, pad], eos) == ([10, 11], True)
    assert split_output([eos, code, eos, pad], eos) == ([], True)
    assert split_output([eos, code, 10, 11, 12], eos) == ([10, 11, 12], False)


def test_decoded_outputs_parse_back_and_are_screened(lm):
    _, tokenizer = lm
    eos, code = tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("en_XX")
    tag_ids = set(tokenizer.convert_tokens_to_ids(TAGS))
    tag = tokenizer.convert_tokens_to_ids

    def ids(*words: str, end: bool = True) -> list[int]:
        body = [i for w in words for i in ([tag(w)] if w in TAGS else word_ids(tokenizer, w))]
        return [eos, code, *body, *([eos, tokenizer.pad_token_id] if end else [])]

    outputs = [ids("B-PER", "mary", "went", "home"),     # new: kept
               ids("went", "home"),                      # new: kept
               ids("B-PER", "mary", "went", "home"),     # repeat of the first
               ids("john", "left"),                      # copy of a training sentence
               ids("B-PER", "mary", "went", end=False),  # cut off
               ids("went", "B-PER"),                     # tag at the end
               ids("I-CW", "B-CW", "film"),              # tag before a tag
               ids()]                                    # nothing
    samples = [decode(tokenizer, o, tag_ids) for o in outputs]
    assert samples[0] == (["B-PER", "mary", "went", "home"], True)
    assert samples[4] == (["B-PER", "mary", "went"], False)
    kept, counts = screen(samples, set(TAGS), [s("john left", "O O")])
    assert kept == [(0, s("mary went home", "B-PER O O")), (1, s("went home", "O O"))]
    assert counts == {**zero_counts(), "generated": 8, "kept": 2, "malformed_truncated": 1,
                      "malformed_empty": 1, "malformed_tag_without_word": 2, "malformed_unknown_tag": 0,
                      "copy": 1, "duplicate": 1}


def test_sampling_does_not_force_eos_at_max_length(lm):
    """With the checkpoint's forced ``</s>``, every 3-token sample would end in ``</s>`` and look finished."""
    model, tokenizer = lm
    cfg = load_config(["profile=tiny", "method=mulda", "mulda.max_length=3", "mulda.rounds=2"]).mulda
    samples = sample(model, tokenizer, 8, cfg, TAGS, seed=0, device=torch.device("cpu"))
    assert len(samples) == 16
    assert not all(finished for _, finished in samples)


def test_sampling_is_seeded(lm):
    model, tokenizer = lm
    cfg = load_config(["profile=tiny", "method=mulda", "mulda.rounds=2"]).mulda

    def draw(seed: int) -> list:
        return sample(model, tokenizer, 6, cfg, TAGS, seed=seed, device=torch.device("cpu"))

    assert draw(0) == draw(0) != draw(1)


def run(tmp_path: Path, seed: int) -> tuple[list[dict], dict]:
    # lr raised from the tiny profile's so that one epoch already yields some well-formed samples
    cfg = load_config(["profile=tiny", "method=mulda", "mulda.epochs=1", "mulda.lr=0.01", f"seed={seed}"])
    train, dev = read_conll(SAMPLE / "train.conll")[:10], read_conll(SAMPLE / "dev.conll")[:4]
    work = tmp_path / f"work{seed}-{len(list(tmp_path.iterdir()))}"
    work.mkdir()
    rows, counts = augment(cfg, Gold(train, dev, ["CORP", "CW", "GRP", "LOC", "PER", "PROD"], "en",
                                     ["en"] * len(train), ["en"] * len(dev), torch.device("cpu"), work))
    assert list(work.iterdir()) == []                               # checkpoints are scratch
    return rows, counts


def test_augment_end_to_end_is_seeded_and_its_counts_add_up(tmp_path, lm):
    from aclm.base import tensorboard
    from conftest import logged_steps

    with tensorboard.logging_into(tmp_path / "events", "on"):
        rows, counts = run(tmp_path, seed=1)
    assert len(logged_steps(tmp_path / "events" / "mulda_lm")["eval/loss"]) == 1   # the LM's one epoch, logged
    assert counts["generated"] == 5 * 10                            # R x N
    assert set(counts) == {*COUNT_KEYS, "lm_best_dev_loss", "lm_best_epoch"}
    assert counts["lm_best_epoch"] == 1                             # the only epoch there is
    dropped = sum(counts[k] for k in COUNT_KEYS if k not in ("generated", "kept"))
    assert counts["generated"] == counts["kept"] + dropped
    assert counts["kept"] == len(rows) > 0
    tags = {f"{p}-{t}" for t in ["CORP", "CW", "GRP", "LOC", "PER", "PROD"] for p in "BI"} | {"O"}
    for row in rows:
        assert set(row) == {"status", "tokens", "tags", "sources", "sample_index"}
        assert row["status"] == "kept" and row["sources"] == []
        assert len(row["tokens"]) == len(row["tags"]) > 0 and set(row["tags"]) <= tags
    assert len({(tuple(r["tokens"]), tuple(r["tags"])) for r in rows}) == len(rows)
    assert run(tmp_path, seed=1) == (rows, counts)
    assert run(tmp_path, seed=2) != (rows, counts)
