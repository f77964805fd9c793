import pytest

from aclm.base.data import TaggedSentence
from aclm.steps.diversity import diversity


def s(text: str, tags: str) -> TaggedSentence:
    return TaggedSentence(text.split(), tags.split())


PAIRS = [
    # entity words: mary (new), paris (old) -> 1/2; others: lives, in (old), now (new) -> 1/3; length +1
    (s("john lives in paris", "B-PER O O B-LOC"),
     s("mary lives in paris now", "B-PER O O B-LOC O")),
    # no entity words (left out of E); others: a, dog (new), sat (old) -> 2/3; length 0
    (s("the cat sat", "O O O"),
     s("a dog sat", "O O O")),
    # entity: google (new) -> 1; others: rose (old), sharply, today (new) -> 2/3; length -1 -> 1
    (s("apple inc rose", "B-CORP I-CORP O"),
     s("google rose sharply today", "B-CORP O O O")),
]


def test_hand_computed_scores():
    scores = diversity(PAIRS)
    assert scores["diversity_e"] == pytest.approx(100 * (1 / 2 + 1) / 2)          # 75.0
    assert scores["diversity_n"] == pytest.approx(100 * (1 / 3 + 2 / 3 + 2 / 3) / 3)  # 55.6
    assert scores["diversity_l"] == pytest.approx((1 + 0 + 1) / 3)


def test_source_words_count_whatever_their_tag_and_repeats_count():
    # "paris" is a non-entity word of the source, so the entity "paris" is not new;
    # "rome" appears twice and is new twice: entity novelty 2/3.
    pair = (s("to paris", "O O"), s("rome paris rome", "B-LOC B-LOC B-LOC"))
    scores = diversity([pair])
    assert scores["diversity_e"] == pytest.approx(100 * 2 / 3)
    assert scores["diversity_n"] is None
    assert scores["diversity_l"] == 1


def test_identical_augmentation_has_zero_diversity():
    source = PAIRS[0][0]
    assert diversity([(source, source)]) == {"diversity_e": 0.0, "diversity_n": 0.0, "diversity_l": 0}


def test_no_pairs_gives_none():
    assert diversity([]) == {"diversity_e": None, "diversity_n": None, "diversity_l": None}
