"""Stratified low-resource samples."""

import pytest

from aclm.base.data import TaggedSentence
from aclm.base.splits import sample, stratified_indices, type_shares


def toy_corpus():
    """300 sentences: PER in 1/2 of them, LOC in 1/3, ORG in 1/10."""
    out = []
    for i in range(300):
        tags = ["O", "O"]
        if i % 2 == 0:
            tags.append("B-PER")
        if i % 3 == 0:
            tags.append("B-LOC")
        if i % 10 == 0:
            tags.append("B-ORG")
        out.append(TaggedSentence([f"w{i}_{j}" for j in range(len(tags))], tags))
    return out


def test_sample_is_deterministic_and_stratified():
    corpus = toy_corpus()
    a = stratified_indices(corpus, 60, seed=3)
    assert a == stratified_indices(corpus, 60, seed=3)
    assert abs(len(a) - 60) <= 3
    chosen = [corpus[i] for i in a]
    for t, share in type_shares(corpus).items():
        assert abs(type_shares(chosen)[t] - share) < 3.0, t


def test_seed_changes_the_sample():
    corpus = toy_corpus()
    assert stratified_indices(corpus, 60, seed=1) != stratified_indices(corpus, 60, seed=2)


def test_exclusion_keeps_samples_disjoint():
    corpus = toy_corpus()
    first = stratified_indices(corpus, 50, seed=1)
    second = sample(corpus, 50, seed=1, exclude=set(first))
    assert not {tuple(corpus[i].tokens) for i in first} & {tuple(s.tokens) for s in second}   # words unique per sentence


def test_impossible_sizes():
    with pytest.raises(ValueError):
        stratified_indices(toy_corpus(), 300, seed=1)
