"""Gold-only with ACLM's training budget (baselines/budget.py): gold copies, as many as ACLM added."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from aclm.base.augmentation import Gold
from aclm.base.config import load_config
from aclm.base.data import TaggedSentence
from aclm.base.runtime import RunError
from baselines.budget import augment

GOLD = [TaggedSentence([f"w{i}", "x"], ["B-PER", "O"]) for i in range(4)]


def gold(needs: dict) -> Gold:
    return Gold(GOLD, [], ["PER"], "en", ["en"] * 4, [], "cpu", Path("."), needs)


def test_as_many_copies_as_aclm_added_each_gold_sentence_as_often_as_any_other_give_or_take_one():
    rows, counts = augment(OmegaConf.create({"seed": 1}), gold({"aclm": {"added": 10}}))
    assert len(rows) == counts["kept"] == 10 and counts["copies_per_gold"] == 2.5
    per_sentence = Counter(row["copy_of"] for row in rows)
    assert sorted(per_sentence.values()) == [2, 2, 3, 3]
    assert all(row["tokens"] == GOLD[row["copy_of"]].tokens and row["sources"] == [row["copy_of"]] for row in rows)
    again, _ = augment(OmegaConf.create({"seed": 1}), gold({"aclm": {"added": 10}}))
    other, _ = augment(OmegaConf.create({"seed": 2}), gold({"aclm": {"added": 10}}))
    assert again == rows and [r["copy_of"] for r in other] != [r["copy_of"] for r in rows]


def test_without_aclm_run_in_the_setting_it_says_what_to_run():
    with pytest.raises(RunError, match="run method=aclm first"):
        augment(OmegaConf.create({"seed": 1}), gold({}))


def test_s6_keeps_every_copy_whatever_the_profile_filters():
    for profile in ("paper", "reference_code"):
        post = load_config([f"profile={profile}", "method=gold_only_budget"]).postprocess
        assert not (post.consistency_filter or post.drop_copies or post.drop_entity_free)
