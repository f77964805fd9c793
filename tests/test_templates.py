"""S3 templates and the parse-back of generations, against hand-written expectations."""

from __future__ import annotations

import random

import pytest

from aclm.base.data import TaggedSentence
from aclm.steps.labels import label_token, label_tokens, linearize, parse_generation, parse_generation_released
from aclm.steps.screening import REASONS, MalformedGeneration
from aclm.steps.templates import Piece, dynamic_mask, join, keyword_mask_share, render, skeleton

TYPES = ["PER", "LOC", "GRP", "CORP", "CW", "PROD"]

# A sentence consistent with the paper's Figure 11 template.
FIG11 = TaggedSentence(
    "it was designed as an interim replacement for the m73 machine gun and was fielded in 1959".split(),
    ["O"] * 9 + ["B-PROD", "I-PROD", "I-PROD"] + ["O"] * 5,
)
FIG11_KEYWORDS = [2, 5, 14]  # designed, interim, fielded
FIG11_TEMPLATE = ("[M] designed [M] interim [M] <b-prod> m73 <b-prod> <i-prod> machine <i-prod> "
                  "<i-prod> gun <i-prod> [M] fielded [M]")


def test_figure_11_template():
    assert render(skeleton(FIG11, FIG11_KEYWORDS), "[M]") == FIG11_TEMPLATE


def test_label_tokens():
    assert label_token("B-PER") == "<b-per>"
    assert label_token("I-Disease") == "<i-disease>"
    assert label_tokens(["PER", "LOC", "PER"]) == ["<b-loc>", "<i-loc>", "<b-per>", "<i-per>"]
    assert len(label_tokens(TYPES)) == 12


def test_linearize():
    assert " ".join(linearize(["lionel", "logue"], ["B-PER", "I-PER"])) == "<b-per> lionel <b-per> <i-per> logue <i-per>"
    assert linearize(["he", "left"], ["O", "O"]) == ["he", "left"]


def test_skeleton_roles():
    sentence = TaggedSentence(["paris", "is", "very", "big"], ["B-LOC", "O", "O", "O"])
    assert skeleton(sentence, [0, 2]) == [  # a keyword index on an entity word changes nothing
        Piece("paris", "B-LOC", "entity"), Piece("is", "O", "mask"),
        Piece("very", "O", "keyword"), Piece("big", "O", "mask")]


def test_sentence_without_entity():
    sentence = TaggedSentence(["nothing", "to", "see"], ["O", "O", "O"])
    assert render(skeleton(sentence, []), "<mask>") == "<mask>"
    assert render(skeleton(sentence, [1]), "<mask>") == "<mask> to <mask>"


def test_entities_at_start_and_end():
    sentence = TaggedSentence(["paris", "beats", "the", "real", "madrid"], ["B-LOC", "O", "O", "B-GRP", "I-GRP"])
    assert render(skeleton(sentence, [1]), "<mask>") == (
        "<b-loc> paris <b-loc> beats <mask> <b-grp> real <b-grp> <i-grp> madrid <i-grp>")


def test_mixner_join_keeps_own_sentence_first():
    a = skeleton(TaggedSentence(["john", "runs", "fast"], ["B-PER", "O", "O"]), [1])
    b = skeleton(TaggedSentence(["slowly", "walks", "mary"], ["O", "O", "B-PER"]), [1])
    joined = join(a, b)
    assert joined == a + b
    # The two trailing/leading masks of a and b collapse into one.
    assert render(joined, "<mask>") == "<b-per> john <b-per> runs <mask> walks <b-per> mary <b-per>"


# --------------------------------------------------------------------------- dynamic masking


def test_epsilon_in_bounds_and_masked_count_in_range():
    rng = random.Random(1)
    for k in (1, 2, 3, 10):
        draws = [keyword_mask_share(k, rng) for _ in range(500)]
        assert all(0.0 <= e <= 1.0 for e in draws)
        assert abs(sum(draws) / len(draws) - 0.5) < 0.05  # centred on 0.5
    assert max(draws) - min(draws) < 0.9  # K = 10: sigma 0.1, no draw near both ends
    pieces = skeleton(FIG11, [0, 1, 2, 3, 4, 5, 6])
    for _ in range(200):
        masked = dynamic_mask(pieces, rng)
        kept = sum(p.role == "keyword" for p in masked)
        assert 0 <= kept <= 7
        assert [p.text for p in masked] == [p.text for p in pieces]
        assert all(p.role == q.role for p, q in zip(masked, pieces) if q.role != "keyword")


def test_dynamic_mask_one_keyword_is_kept_or_masked():
    pieces = skeleton(FIG11, [2])
    outcomes = {render(dynamic_mask(pieces, random.Random(seed)), "[M]") for seed in range(40)}
    assert outcomes == {
        "[M] designed [M] <b-prod> m73 <b-prod> <i-prod> machine <i-prod> <i-prod> gun <i-prod> [M]",
        "[M] <b-prod> m73 <b-prod> <i-prod> machine <i-prod> <i-prod> gun <i-prod> [M]",
    }


def test_dynamic_mask_without_keywords_changes_nothing():
    pieces = skeleton(FIG11, [])
    rng = random.Random(0)
    state = rng.getstate()
    assert dynamic_mask(pieces, rng) == pieces
    assert rng.getstate() == state  # no draw consumed


def test_same_seed_same_templates():
    def rounds(seed: int) -> list[str]:
        rng = random.Random(seed)
        return [render(dynamic_mask(skeleton(FIG11, FIG11_KEYWORDS), rng), "<mask>") for _ in range(10)]

    assert rounds(3) == rounds(3)
    assert len(set(rounds(3))) > 1  # fresh masks every round
    assert any(rounds(s) != rounds(3) for s in range(4, 10))


# --------------------------------------------------------------------------- parsing generations


@pytest.mark.parametrize("tokens, tags", [
    (FIG11.tokens, FIG11.tags),
    (["john", "mary", "met"], ["B-PER", "B-PER", "O"]),                  # adjacent, same type
    (["john", "smith", "mary"], ["B-PER", "I-PER", "B-PER"]),
    (["acme", "paris", "office"], ["B-CORP", "B-LOC", "O"]),             # adjacent, different types
    (["he", "saw", "new", "york"], ["O", "O", "B-LOC", "I-LOC"]),        # entity at the end
    (["nothing", "here"], ["O", "O"]),
])
def test_round_trip(tokens, tags):
    parsed = parse_generation(" ".join(linearize(tokens, tags)), TYPES)
    assert (parsed.tokens, parsed.tags) == (list(tokens), list(tags))


def test_parse_keeps_dataset_type_spelling_and_repairs_i_start():
    parsed = parse_generation("<i-disease> flu <i-disease> spreads", ["Disease"])
    assert parsed.tags == ["B-Disease", "O"]
    parsed = parse_generation("<b-per> new <b-per> <i-loc> york <i-loc>", TYPES)
    assert parsed.tags == ["B-PER", "B-LOC"]


def test_parse_several_words_in_one_pair_continue_the_entity():
    assert parse_generation("<b-loc> new york <b-loc> is big", TYPES).tags == ["B-LOC", "I-LOC", "O", "O"]


def test_parse_drops_sequence_markers_and_language_codes():
    text = "en_XX<b-per> john <b-per> left early</s><pad>"
    parsed = parse_generation(text, TYPES)
    assert (parsed.tokens, parsed.tags) == (["john", "left", "early"], ["B-PER", "O", "O"])
    assert parse_generation("<s> hi_IN a b </s>", TYPES).tokens == ["a", "b"]


@pytest.mark.parametrize("text, mask", [("<b-per> john <b-per> <mask> left", "<mask>"),
                                        ("<b-per> john <b-per> left [M] early", "[M]"),
                                        ("<b-per> john <b-per> left<mask>", "<mask>")])
def test_an_unfilled_mask_is_malformed_not_deleted(text, mask):
    with pytest.raises(MalformedGeneration) as err:
        parse_generation(text, TYPES, mask_token=mask)
    assert err.value.reason == "unfilled_mask"


@pytest.mark.parametrize("text, reason", [
    ("<b-foo> john <b-foo> left", "unknown_tag"),
    ("<b-per> john left", "unpaired_tag"),
    ("<b-per> john <i-per> smith <i-per>", "unpaired_tag"),
    ("john <b-per>", "unpaired_tag"),
    ("<b-per>john <b-per>", "glued_tag"),
    ("<b-per> john<b-per>", "glued_tag"),
    ("<b-per> <b-per> left", "empty"),
    ("", "empty"),
    ("en_XX </s>", "empty"), ("en_XX </s> <mask>", "unfilled_mask"),
])
def test_malformed_generations(text, reason):
    with pytest.raises(MalformedGeneration) as err:
        parse_generation(text, TYPES)
    assert err.value.reason == reason
    assert reason in REASONS


def test_types_differing_only_in_case_are_refused():
    with pytest.raises(ValueError, match="share one label token"):
        parse_generation("x", ["Gene", "GENE"])


@pytest.mark.parametrize("text, tokens, tags", [
    ("<b-per> ann <i-loc> sang", ["ann", "sang"], ["B-PER", "O"]),                # closed by another label token
    ("<i-per> ann <i-per> sang", ["ann", "sang"], ["I-PER", "O"]),                # an I- opening stays
    ("<b-loc> new york <b-loc> is big", ["new york", "is", "big"], ["B-LOC", "O", "O"]),  # one line, one token
    ("a<b-per>b <b-per> x <b-per>", ["a<b-per>b", "x"], ["O", "B-PER"]),          # glued inside: a plain word
    ("en_XX <b-per>  ann <b-per>\tleft</s>", ["ann", "left"], ["B-PER", "O"]),   # any whitespace cuts
])
def test_the_released_reading(text, tokens, tags):
    parsed = parse_generation_released(text, TYPES)
    assert (parsed.tokens, parsed.tags) == (tokens, tags)


@pytest.mark.parametrize("text, reason", [
    ("<b-per> ann sang", "unpaired_tag"), ("<b-per> ann <b-per> <i-per>", "unpaired_tag"),
    ("<B-PER> ann <B-PER>", "unknown_tag"), ("<b-foo> ann <b-foo>", "unknown_tag"),
    ("<b-per>ann <b-per>", "glued_tag"), ("ann> sang", "glued_tag"), ("<", "glued_tag"),
    ("<mask> sang", "unfilled_mask"), ("sang <mask>.", "unfilled_mask"),
    ("<b-per> <b-per> sang", "empty"), ("</s>", "empty"),
])
def test_what_the_released_reading_refuses(text, reason):
    with pytest.raises(MalformedGeneration) as err:
        parse_generation_released(text, TYPES)
    assert err.value.reason == reason
