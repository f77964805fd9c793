import random
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from aclm.base.data import TaggedSentence
from aclm.steps.screening import zero_counts
from baselines.lwtr import RELEASED_SEED, augment, augment_gold, replace, replay, token_distribution

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


# The replay example: "the", "in" and "and" are stop words (never replaced, never drawn). Each pool's words are
# equally frequent (O: cat sat saw dog ran; B-LOC: paris rome; B-PER: anna, seen twice), so a frequency-weighted
# draw from a pool of n words is word floor(u * n) of it, u being the draw's uniform number.
REPLAY_GOLD = [
    TaggedSentence("the cat sat in paris".split(), "O O O O B-LOC".split()),
    TaggedSentence("anna saw the dog".split(), "B-PER O O O".split()),
    TaggedSentence("rome and anna ran".split(), "B-LOC O B-PER O".split()),
]
REPLAY_POOLS = {"O": ["cat", "sat", "saw", "dog", "ran"], "B-LOC": ["paris", "rome"], "B-PER": ["anna"]}


def replay_by_hand(p: float, rounds: int, seed: int) -> list[list[str]]:
    """The replay worked out from numpy's legacy generator one uniform number at a time: for each sentence and
    each of its rounds, first a coin per token (numpy's binomial(1, p) for p <= 0.5 is up when u > 1 - p), then,
    left to right, one number per up coin on a word that is not a stop word, which picks the new word."""
    uniform = np.random.RandomState(seed).random_sample
    out = []
    for sentence in REPLAY_GOLD:
        for _ in range(rounds):
            coins = [uniform() > 1 - p for _ in sentence.tokens]
            tokens = list(sentence.tokens)
            for j, up in enumerate(coins):
                if up and tokens[j] not in ("the", "in", "and"):
                    pool = REPLAY_POOLS[sentence.tags[j]]
                    tokens[j] = pool[int(uniform() * len(pool))]
            out.append(tokens)
    return out


def test_replay_matches_numpys_draws_worked_out_by_hand():
    assert {tag: words for tag, (words, _) in token_distribution(REPLAY_GOLD, "replay").items()} == REPLAY_POOLS
    made = replay(REPLAY_GOLD, 0.3, 3, RELEASED_SEED)
    assert [s.tokens for s in made] == replay_by_hand(0.3, 3, RELEASED_SEED)
    # The same, written out. Seed 26's first numbers: .308 .519 .768 .789 .871 (coins of augmentation 1: up on
    # "sat", "in", "paris"), .188 ("sat" -> O word 0, "cat"), .27 ("paris" -> B-LOC word 0, itself; "in" spent
    # its coin and stays), .496 .739 .195 .18 .539 (up on "cat"), .283 (-> word 1, "sat"), ...
    assert [" ".join(s.tokens) for s in made] == [
        "the cat cat in paris", "the sat sat in paris", "the cat sat in rome",
        "anna saw the cat", "anna saw the dog", "anna saw the sat",
        "rome and anna ran", "rome and anna ran", "rome and anna ran"]
    assert [s.meta["redrawn"] for s in made] == [[2, 4], [1], [4], [3], [0], [0, 3], [], [2], [0, 2]]
    assert replay_by_hand(0.3, 3, 27) != replay_by_hand(0.3, 3, RELEASED_SEED)  # the example tells seeds apart
    assert [s.tokens for s in replay(REPLAY_GOLD, 0.3, 3, 27)] == replay_by_hand(0.3, 3, 27)


def test_replay_writes_r_per_gold_sentence_in_a_row_deterministically_and_leaves_numpy_alone():
    before = np.random.get_state()
    kept, counts = augment(TRAIN, p=0.3, rounds=5, seed=RELEASED_SEED, variant="replay")
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    assert augment(TRAIN, p=0.3, rounds=5, seed=RELEASED_SEED, variant="replay") == (kept, counts)
    assert [(s.meta["source_index"], s.meta["round"]) for s in kept] == [(i, r) for i in range(4) for r in range(5)]
    assert [s.tags for s in kept] == [s.tags for s in TRAIN for _ in range(5)]
    assert counts == {**zero_counts(), "generated": 20, "kept": 20}                # copies and repeats stay
    assert all(s.tokens[3:5] == ["to", "the"] for s in kept[:5])                    # stop words never replaced
    # Each sentence's augmentations come in a row, so a sentence's draws shift with R: R = 3 is no prefix of R = 5.
    assert [s.tokens for s in augment(TRAIN, 0.3, 3, RELEASED_SEED, "replay")[0]] == \
        [s.tokens for s in replay(TRAIN, 0.3, 3, RELEASED_SEED)]
    assert augment(TRAIN, p=0.3, rounds=5, seed=27, variant="replay")[0] != kept


def test_replay_draws_from_lwtr_replay_seed_whatever_the_run_seed():
    def rows(run_seed, variant="replay", replay_seed=RELEASED_SEED):
        c = SimpleNamespace(seed=run_seed, generation=SimpleNamespace(rounds=5),
                            lwtr=SimpleNamespace(p=0.3, variant=variant, replay_seed=replay_seed))
        return augment_gold(c, SimpleNamespace(train=TRAIN))[0]

    assert rows(1) == rows(2)
    assert [r["tokens"] for r in rows(1)] == [s.tokens for s in replay(TRAIN, 0.3, 5, RELEASED_SEED)]
    assert rows(1, replay_seed=27) != rows(1)
    assert rows(1, "released") != rows(2, "released")


def test_the_reference_code_profile_replays_the_released_lwtr_files():
    from aclm.base.config import load_config

    assert dict(load_config(["profile=reference_code", "method=lwtr"]).lwtr) == \
        {"p": 0.3, "variant": "replay", "replay_seed": RELEASED_SEED}
    assert load_config(["method=lwtr"]).lwtr.variant == "paper"


def test_reference_code_lwtr_adds_exactly_r_sentences_per_gold_sentence(tiny_models, tmp_path):
    """`make run METHOD=lwtr PROFILE=reference_code` as the released LwTR files are: gold + R x gold, unfiltered
    (the hub models swapped for the tiny ones, the only change)."""
    from aclm.base.config import load_config
    from aclm.stages import outputs
    from aclm.run.chain import run_to_result, run_method

    cfg = load_config(["profile=reference_code", "method=lwtr", "dataset=sample/en", "gold=full", "ner.epochs=1",
                       "ner.model=models/tiny/xlm-roberta", "ner.on_no_learning=warn", f"run_dir={tmp_path}"])
    assert not cfg.postprocess.consistency_filter and not cfg.postprocess.drop_copies
    run_method(cfg)
    report = outputs.result(run_to_result(cfg))["augmentation"]
    assert report["added"] == cfg.generation.rounds * report["gold"]
    assert report["postprocess"]["kept"] == report["postprocess"]["candidates"]
