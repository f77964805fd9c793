"""The one screening function and drop-reason vocabulary, and that all five methods report through it."""

from __future__ import annotations

import pytest


from aclm.base.config import DAGAConfig
from aclm.base.data import TaggedSentence
from aclm.steps import generation as aclm_generation
from aclm.steps.labels import parse_generation
from aclm.steps.screening import COUNT_KEYS, REASONS, STATUSES, MalformedGeneration, screen, zero_counts
from baselines import daga, lwtr, mulda
from melm import generation as melm_generation
from melm.encoding import Seed


def s(text: str, tags: str) -> TaggedSentence:
    return TaggedSentence(text.split(), tags.split())


def test_count_keys_are_generated_the_statuses_and_one_malformed_key_per_reason():
    assert COUNT_KEYS == ("generated", "kept", "duplicate", "copy", "malformed_empty", "malformed_unknown_tag",
                          "malformed_unpaired_tag", "malformed_glued_tag", "malformed_tag_without_word",
                          "malformed_unfilled_mask", "malformed_tags_changed", "malformed_truncated",
                          "malformed_lost_characters")
    assert STATUSES == COUNT_KEYS[1:]
    assert zero_counts(5) == {key: 5 if key == "generated" else 0 for key in COUNT_KEYS}


def test_a_malformed_generation_names_one_of_the_shared_reasons():
    assert MalformedGeneration("tags_changed", "x").status == "malformed_tags_changed"
    assert str(MalformedGeneration("empty", "nothing")) == "empty: nothing"
    with pytest.raises(ValueError, match="unknown reason 'invalid_empty'"):
        MalformedGeneration("invalid_empty")


def test_screen_parses_then_drops_copies_then_repeats_of_the_same_source():
    outputs = ["<b-per> ann <b-per> sang",   # 0, source 0: kept
               "<b-per> ann <b-per> sang",   # 1, source 0: repeat
               "<b-per> ann <b-per> sang",   # 2, source 1: the same words, another source: kept
               "<b-per> bob <b-per> sang",   # 3, source 1: its source's words: copy
               "<b-per> bob <b-per> sang",   # 4, source 1: a copy again, not a repeat (copies are not remembered)
               "<b-per> ann sang",           # 5: unpaired
               "<b-xyz> a <b-xyz>"]          # 6: unknown type
    sources = [0, 0, 1, 1, 1, 0, 0]
    source_words = {0: ["cy", "sang"], 1: ["bob", "sang"]}
    rows, counts = screen(sources, outputs, lambda text: parse_generation(text, ["PER"]),
                          lambda i, sentence: sentence.tokens == source_words[sources[i]])
    assert [r.status for r in rows] == ["kept", "duplicate", "kept", "copy", "copy", "malformed_unpaired_tag",
                                        "malformed_unknown_tag"]
    assert rows[0].sentence == s("ann sang", "B-PER O") and rows[3].sentence == s("bob sang", "B-PER O")
    assert rows[5].sentence is None
    assert counts == {**zero_counts(), "generated": 7, "kept": 2, "duplicate": 1, "copy": 2,
                      "malformed_unpaired_tag": 1, "malformed_unknown_tag": 1}


def test_a_repeat_is_found_in_the_text_as_the_tokenizer_normalises_it():
    outputs = [s("北京 ， 中国", "B-LOC O B-LOC"), s("北京 , 中国", "B-LOC O B-LOC"), s("北京 ， 中国", "B-LOC O O")]
    rows, _ = screen([0, 0, 0], outputs)
    assert [r.status for r in rows] == ["kept", "duplicate", "kept"]      # another tag is another sentence


def test_repeats_by_raw_text_are_found_before_parsing_or_not_at_all():
    outputs = ["<b-per> ann", "<b-per> ann", "<b-per> ann <b-per>", "<b-per>  ann <b-per>", "<b-per> ann <b-per>"]
    parse = lambda text: parse_generation(text, ["PER"])  # noqa: E731
    rows, counts = screen([0] * 5, outputs, parse, dedupe="raw")
    assert [r.status for r in rows] == ["malformed_unpaired_tag", "duplicate", "kept", "kept", "duplicate"]
    assert counts == {**zero_counts(), "generated": 5, "kept": 2, "duplicate": 2, "malformed_unpaired_tag": 1}
    rows, _ = screen([0] * 5, outputs, parse, dedupe="off")
    assert [r.status for r in rows] == ["malformed_unpaired_tag"] * 2 + ["kept"] * 3
    with pytest.raises(ValueError, match="dedupe='words'"):
        screen([0], outputs[:1], parse, dedupe="words")


def test_screen_takes_parsed_results_and_tells_words_from_tags():
    ann = s("ann sang", "B-PER O")
    outputs = [ann, s("ann sang", "B-LOC O"), MalformedGeneration("truncated"), s("ann sang", "B-PER O")]
    rows, counts = screen([None] * 4, outputs)
    assert [r.status for r in rows] == ["kept", "kept", "malformed_truncated", "duplicate"]
    assert rows[0].sentence is ann
    assert counts == {**zero_counts(), "generated": 4, "kept": 2, "duplicate": 1, "malformed_truncated": 1}
    with pytest.raises(ValueError, match="2 sources for 1 outputs"):
        screen([0, 1], [ann])
    with pytest.raises(TypeError, match="candidate 0"):
        screen([0], ["ann sang"])


def test_the_five_methods_count_with_the_same_keys():
    train = [s("john smith went to paris", "B-PER I-PER O O B-LOC"), s("mary sang", "B-PER O")]
    keys = {}

    # ACLM S5
    jobs = [aclm_generation.Job(0, r, None, "t") for r in range(3)]
    rows, counts = aclm_generation.screen(jobs, ["<b-per> ann <b-per> sang", "<b-per> ann <b-per> sang",
                                                 "<b-per> ann"], ["PER", "LOC"])
    assert {r["status"] for r in rows} <= set(STATUSES)
    keys["aclm"] = counts

    # LwTR
    keys["lwtr"] = lwtr.augment(train, p=0.5, rounds=3, seed=0)[1]

    # DAGA, end to end (a few seconds of LM training)
    cfg = DAGAConfig(embedding_dim=8, hidden_size=8, dropout=0.0, lr=0.01, epochs=1, batch_size=2, max_length=8)
    keys["daga"] = daga.generate(train, train, cfg, rounds=2, seed=0)[1]

    # MulDA's screening of its decoded samples
    samples = [(["B-PER", "ann", "sang"], True), (["mary", "sang"], False), (["B-PER"], True)]
    keys["mulda"] = mulda.screen(samples, {"B-PER", "I-PER", "B-LOC", "I-LOC"}, train)[1]

    # MELM's screening of its read-back generations
    seeds = [Seed(train[1], 0)]
    melm_jobs = [melm_generation.Job(0, r, []) for r in range(3)]
    generated = [s("ann sang", "B-PER O"), train[1], MalformedGeneration("tags_changed")]
    keys["melm"] = melm_generation.screen(seeds, train[1:], melm_jobs, generated)[1]

    for method, counts in keys.items():
        assert tuple(counts) == COUNT_KEYS, method
        assert counts["generated"] == sum(counts[k] for k in STATUSES), method
    assert keys["mulda"] == {**zero_counts(), "generated": 3, "kept": 1, "malformed_truncated": 1,
                             "malformed_tag_without_word": 1}
    assert keys["melm"] == {**zero_counts(), "generated": 3, "kept": 1, "copy": 1, "malformed_tags_changed": 1}
    assert keys["aclm"] == {**zero_counts(), "generated": 3, "kept": 1, "duplicate": 1, "malformed_unpaired_tag": 1}
    assert all(f"malformed_{reason}" in COUNT_KEYS for reason in REASONS)
