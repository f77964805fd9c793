"""tools/fit_released_lwtr.py recovers the rate of files written by baselines.lwtr itself (no released data)."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from aclm.base.data import TaggedSentence, read_conll, write_conll
from baselines.lwtr import ENGLISH_FUNCTION_WORDS, augment
from tools.fit_released_lwtr import fit, pairs, positions, replay, split_layout

ROUNDS = 5


def gold_sample(n: int = 60, seed: int = 0) -> list[TaggedSentence]:
    """``n`` sentences of 6-12 tokens: O words (a few of them stop words, which stay fixed) and PER/LOC names."""
    rng = random.Random(seed)
    plain = [f"word{i}" for i in range(40)] + ["the", "of", "and"]
    names = {"PER": [f"name{i}" for i in range(12)], "LOC": [f"place{i}" for i in range(8)]}
    sentences = []
    for _ in range(n):
        tokens, tags, length = [], [], rng.randint(6, 12)
        while len(tokens) < length:
            if rng.random() < 0.2:
                etype = rng.choice(sorted(names))
                for j in range(rng.randint(1, 2)):
                    tokens.append(rng.choice(names[etype]))
                    tags.append(f"{'B' if j == 0 else 'I'}-{etype}")
            else:
                tokens.append(rng.choice(plain))
                tags.append("O")
        sentences.append(TaggedSentence(tokens, tags))
    return sentences


def released_layout(gold: list[TaggedSentence], p: float, seed: int) -> list[TaggedSentence]:
    """What a released file holds: the gold sample, then each gold sentence's augmentations together."""
    kept, _ = augment(gold, p=p, rounds=ROUNDS, seed=seed, variant="released")
    assert len(kept) == ROUNDS * len(gold)
    return gold + sorted(kept, key=lambda s: (s.meta["source_index"], s.meta["round"]))


@pytest.fixture
def released_tree(tmp_path):
    """data/100/{xx,yy}_sample_train.conll and their LwTR files at p = 0.3 and 0.6, laid out as released."""
    gold = gold_sample()
    (tmp_path / "data" / "100" / "lwtr").mkdir(parents=True)
    for lang, p in (("xx", 0.3), ("yy", 0.6)):
        write_conll(tmp_path / "data" / "100" / f"{lang}_sample_train.conll", gold)
        write_conll(tmp_path / "data" / "100" / "lwtr" / f"{lang}_sample_train_lwtr.conll",
                    released_layout(gold, p, seed=7))
    write_conll(tmp_path / "data" / "100" / "lwtr" / "zz_sample_train_lwtr.conll", gold)   # no gold beside it
    return tmp_path


def fitted(gold_path, lwtr_path):
    gold, released = read_conll(gold_path), read_conll(lwtr_path)
    groups, problems = split_layout(gold, released, ROUNDS)
    assert problems == []
    pos, problems = positions(gold, groups, ROUNDS)
    assert problems == []
    return fit(pos, 0.3)


def test_the_fit_recovers_the_rate_that_wrote_the_file(released_tree):
    found, unpaired = pairs(released_tree)
    assert [(size, lang) for size, lang, *_ in found] == [("100", "xx"), ("100", "yy")]
    assert unpaired == ["data/100/lwtr/zz_sample_train_lwtr.conll: no data/100/zz_sample_train.conll"]
    at_03, at_06 = (fitted(gold, lwtr) for *_, gold, lwtr in found)

    assert at_03.eligible > 2000 and at_03.se < 0.015
    assert abs(at_03.p - 0.3) < 3 * at_03.se
    assert abs(at_03.z) < 3
    assert abs(at_06.p - 0.6) < 3 * at_06.se
    assert at_06.z > 10                     # the p = 0.6 file is far from the rate it is tested against
    assert at_06.expected == pytest.approx(at_03.expected)   # same gold sample: same expectation at 0.3


def dai_adel_layout(gold: list[TaggedSentence], p: float, seed: int) -> list[TaggedSentence]:
    """A restatement of Dai & Adel's LwTR (numpy's legacy generator, a coin per token, the stop words kept and
    never drawn, each gold sentence's augmentations in a row), written here apart from the tool's replay."""
    pools: dict[str, Counter] = {}
    for sentence in gold:
        for token, tag in zip(sentence.tokens, sentence.tags):
            if token.lower() not in ENGLISH_FUNCTION_WORDS:
                pools.setdefault(tag, Counter())[token] += 1
    rng = np.random.RandomState(seed)
    out = list(gold)
    for sentence in gold:
        for _ in range(ROUNDS):
            tokens = []
            for coin, token, tag in zip(rng.binomial(1, p, len(sentence)), sentence.tokens, sentence.tags):
                if coin and token.lower() not in ENGLISH_FUNCTION_WORDS:
                    words, counts = list(pools[tag]), np.array(list(pools[tag].values()), dtype=float)
                    token = words[rng.choice(len(words), 1, p=counts / counts.sum())[0]]
                tokens.append(token)
            out.append(TaggedSentence(tokens, list(sentence.tags)))
    return out


def test_the_replay_reproduces_dai_and_adel_and_no_other_generator():
    gold = gold_sample()
    ours, theirs = released_layout(gold, 0.3, seed=7), dai_adel_layout(gold, 0.3, seed=26)
    for layout, reproduced in ((theirs, True), (ours, False)):
        groups, problems = split_layout(gold, layout, ROUNDS)
        assert problems == []
        pos, _ = positions(gold, groups, ROUNDS)
        result = replay(gold, groups, ROUNDS)
        assert (result.identical == result.total == ROUNDS * len(gold)) is reproduced
        assert 0 < result.same_word < result.coins
        assert abs(result.coins / (ROUNDS * len(pos.d)) - 0.3) < 0.05
    assert replay(gold, split_layout(gold, theirs, ROUNDS)[0], ROUNDS, seed=27).identical < ROUNDS * len(gold)
    # The tool's replay is the library's: lwtr.variant=replay writes the restatement's augmentations, in its order.
    kept, _ = augment(gold, p=0.3, rounds=ROUNDS, seed=26, variant="replay")
    assert [(s.tokens, s.tags) for s in kept] == [(s.tokens, s.tags) for s in theirs[len(gold):]]


def test_a_broken_layout_is_reported():
    gold = gold_sample(n=5)
    released = released_layout(gold, 0.3, seed=1)
    assert split_layout(gold, released, ROUNDS)[1] == []
    assert "not (1 + 5) x 5 gold" in split_layout(gold, released[:-1], ROUNDS)[1][0]
    shifted = released[:5] + released[6:] + released[5:6]          # the first augmentation moved to the end
    groups, problems = split_layout(gold, shifted, ROUNDS)
    assert groups == [] and problems
