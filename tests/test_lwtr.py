import random
from collections import Counter

import pytest

from aclm.base.data import TaggedSentence
from aclm.steps.screening import zero_counts
from baselines.lwtr import augment, replace, token_distribution

# Each label has its own words, so a token that crossed labels would be visible.
TRAIN = [
    TaggedSentence(["john", "smith", "went", "to", "the", "city"], ["B-PER", "I-PER", "O", "O", "O", "O"]),
    TaggedSentence(["mary", "jones", "saw", "the", "paris", "show"], ["B-PER", "I-PER", "O", "O", "B-LOC", "O"]),
    TaggedSentence(["new", "york", "is", "the", "best"], ["B-LOC", "I-LOC", "O", "O", "O"]),
    TaggedSentence(["john", "met", "mary"], ["B-PER", "O", "B-PER"]),
]


def test_distribution_is_per_full_tag_with_relative_frequencies():
    dist = token_distribution(TRAIN)
    assert set(dist) == {"B-PER", "I-PER", "O", "B-LOC", "I-LOC"}
    assert dist["B-PER"] == (["john", "mary"], [0.5, 0.5])
    assert dist["I-PER"] == (["smith", "jones"], [0.5, 0.5])
    assert dist["B-LOC"] == (["paris", "new"], [0.5, 0.5])
    tokens, probs = dist["O"]
    assert dict(zip(tokens, probs))["the"] == pytest.approx(3 / 11)
    assert sum(probs) == pytest.approx(1.0)


def test_label_sequence_never_changes():
    dist = token_distribution(TRAIN)
    rng = random.Random(0)
    for _ in range(500):
        for sentence in TRAIN:
            new = replace(sentence, dist, 0.5, rng)
            assert new.tags == sentence.tags
            assert len(new.tokens) == len(sentence.tokens)


def test_p_zero_gives_no_augmentation():
    kept, counts = augment(TRAIN, p=0.0, rounds=3, seed=1)
    assert kept == []
    assert counts == {**zero_counts(), "generated": 12, "copy": 12, "duplicate": 0, "kept": 0}


def test_p_one_replaces_every_token_by_a_same_label_training_token():
    dist = token_distribution(TRAIN)
    vocab = {tag: set(tokens) for tag, (tokens, _) in dist.items()}
    rng = random.Random(2)
    changed = 0
    for _ in range(200):
        for sentence in TRAIN:
            new = replace(sentence, dist, 1.0, rng)
            assert all(tok in vocab[tag] for tok, tag in zip(new.tokens, new.tags))
            changed += sum(a != b for a, b in zip(new.tokens, sentence.tokens))
    assert changed > 0


def test_same_seed_same_output_and_other_seed_differs():
    first = augment(TRAIN, p=0.3, rounds=5, seed=7)
    assert augment(TRAIN, p=0.3, rounds=5, seed=7) == first
    assert augment(TRAIN, p=0.3, rounds=5, seed=8)[0] != first[0]


def test_fewer_rounds_are_a_prefix_of_more_rounds():
    short, _ = augment(TRAIN, p=0.3, rounds=2, seed=3)
    long, _ = augment(TRAIN, p=0.3, rounds=4, seed=3)
    assert long[:len(short)] == short


def test_tokens_are_drawn_in_proportion_to_training_frequency():
    train = [TaggedSentence(["the"] * 3 + ["a"], ["O"] * 4)]  # P(the) = 0.75
    dist = token_distribution(train)
    rng = random.Random(11)
    draws = Counter(replace(TaggedSentence(["a"], ["O"]), dist, 1.0, rng).tokens[0] for _ in range(4000))
    assert draws["the"] / 4000 == pytest.approx(0.75, abs=0.03)  # sd 0.007


def test_replacement_rate_is_p():
    train = [TaggedSentence(["the"] * 3 + ["a"], ["O"] * 4)]
    dist = token_distribution(train)
    rng = random.Random(5)
    source = TaggedSentence(["a"] * 4000, ["O"] * 4000)
    new = replace(source, dist, 0.3, rng)
    # A token changes when chosen (0.3) and redrawn as "the" (0.75).
    assert sum(t != "a" for t in new.tokens) / 4000 == pytest.approx(0.225, abs=0.03)


def test_counts_for_duplicates_within_a_source():
    # One token, two candidates: each source has exactly one new augmentation, the other word.
    train = [TaggedSentence(["a"], ["O"]), TaggedSentence(["b"], ["O"])]
    kept, counts = augment(train, p=1.0, rounds=10, seed=0)
    assert {s.meta["source_index"]: s.tokens for s in kept} == {0: ["b"], 1: ["a"]}
    assert counts["generated"] == 20 and counts["kept"] == 2
    assert counts["copy"] + counts["duplicate"] == 18
    assert counts["copy"] > 0 and counts["duplicate"] > 0


def test_label_without_training_tokens_is_an_error():
    dist = token_distribution(TRAIN)
    with pytest.raises(ValueError, match="B-CORP"):
        replace(TaggedSentence(["acme"], ["B-CORP"]), dist, 1.0, random.Random(0))


def test_released_variant_never_touches_function_words_and_keeps_every_augmentation():
    dist = token_distribution(TRAIN, "released")
    assert "the" not in dist["O"][0] and "to" not in dist["O"][0]       # never drawn
    rng = random.Random(4)
    for _ in range(200):
        new = replace(TRAIN[0], dist, 1.0, rng, "released")
        assert new.tokens[3:5] == ["to", "the"]                          # never replaced
    kept, counts = augment(TRAIN, p=0.0, rounds=3, seed=1, variant="released")
    assert [s.tokens for s in kept] == [s.tokens for s in TRAIN] * 3     # copies and repeats stay
    assert counts == {**zero_counts(), "generated": 12, "kept": 12}
    with pytest.raises(ValueError, match="lwtr.variant='cased'"):
        augment(TRAIN, p=0.3, rounds=1, seed=1, variant="cased")
