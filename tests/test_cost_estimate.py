"""Table 1's cost from one measured setting (tools/stage_costs.py), checked by hand on round figures."""

from __future__ import annotations

import pytest

from tools.stage_costs import OFFICIAL_TEST_SENTENCES, table1_estimate

TAGGER = {"paper_parts": {"once": 10.0, "train": 100.0, "dev": 50.0}}
ROWS = [{"stage": "data", "paper_seconds": 0.0},
        {"stage": "s1_ner", **TAGGER, "grow": 1.0, "paper_seconds": 160.0},
        {"stage": "s2_keywords", "paper_seconds": 20.0},
        {"stage": "s3_templates", "paper_seconds": 0.0},
        {"stage": "s4_generator", "paper_seconds": 60.0},
        {"stage": "s5_generation", "paper_seconds": 30.0},
        {"stage": "s6_postprocess", "paper_seconds": 0.0},
        {"stage": "s7_ner", **TAGGER, "grow": 6.0, "paper_seconds": 660.0},
        {"stage": "s7_eval", "paper_seconds": 7.0, "scored": 2000, "test_sets": 1, "score_rate": 0.001,
         "score_once": 5.0}]
# Table 1: 10 languages x gold 100, 200, 500, 1000 x 3 seeds; en's runs are scored on 5 test sets, the others on 1
GOLD_SCALES = 3 * 10 * (1 + 2 + 5 + 10)              # the cells' gold sizes over 100, summed: 540
TEST_SETS = 12 * 5 + 108 * 1                         # test sets scored by one method's 120 runs: 168


def test_only_what_reads_the_gold_sentences_grows_with_them():
    table1 = table1_estimate(ROWS, gold=100, dev=800)
    assert table1["runs"] == {m: 120 for m in ("gold_only", "lwtr", "daga", "melm", "aclm_only_entity",
                                               "aclm_random", "aclm")}
    scoring = 120 * 5.0 + TEST_SETS * 2000 * 0.001    # loading once a run, then 2 s a test set
    gold_only = 120 * (10 + 50) + 100 * GOLD_SCALES + scoring
    assert table1["methods"]["gold_only"]["low"] == table1["methods"]["gold_only"]["high"] == pytest.approx(gold_only)
    s2 = 20 * sum(3 * 10 * (gold + 800) / 900 for gold in (100, 200, 500, 1000))    # it reads gold and dev
    aclm = s2 + (60 + 30) * GOLD_SCALES + scoring + 120 * (10 + 50)
    assert table1["methods"]["aclm"]["low"] == pytest.approx(aclm + 100 * GOLD_SCALES)
    assert table1["methods"]["aclm"]["high"] == pytest.approx(aclm + 6 * 100 * GOLD_SCALES)
    assert table1["test_scorings"] == 7 * TEST_SETS and table1["sentences_per_test_set"] == 2000
    assert table1["official_test_sets"] == pytest.approx([0.001 * 7 * TEST_SETS * (n - 2000)
                                                          for n in OFFICIAL_TEST_SENTENCES])


def test_the_optional_rows_are_costed_apart_from_the_papers_table():
    table1 = table1_estimate(ROWS, gold=100, dev=800)
    controls = table1["optional"]
    assert set(controls) == {"gold_only_budget", "gold_only_tuned", "llm"} and "gold_only_tuned" not in table1["runs"]
    gold_only = table1["methods"]["gold_only"]["low"]
    scoring = 120 * 5.0 + TEST_SETS * 2000 * 0.001
    # four rates, each S1's training; the budget control trains as ACLM's S7 does, without generating
    assert controls["gold_only_tuned"]["low"] == pytest.approx(4 * (gold_only - scoring) + scoring)
    assert controls["gold_only_budget"]["high"] == pytest.approx(scoring + 120 * (10 + 50) + 6 * 100 * GOLD_SCALES)
    # the LLM writes at its assumed half of ACLM's S4 + S5, then trains as ACLM's S7
    assert controls["llm"]["high"] == pytest.approx(scoring + 0.5 * (60 + 30) * GOLD_SCALES + 120 * (10 + 50)
                                                    + 6 * 100 * GOLD_SCALES)
