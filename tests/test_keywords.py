"""S2 keyword selection: hand-worked attention maps, candidates, k, and batched extraction."""

from __future__ import annotations

import logging
import random

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel


from aclm.base.config import KeywordConfig
from aclm.base.data import TaggedSentence
from aclm.steps import keywords as kw

# --------------------------------------------------------------------------- sub-words to words


def test_word_attention_sums_received_and_averages_given_subtokens():
    # Sub-tokens: <s> a1 a2 b1 </s>, so word 0 = {1, 2}, word 1 = {3}; attn[r, c] = 5r + c.
    attn = torch.arange(25, dtype=torch.float).reshape(5, 5)
    word_ids = [None, 0, 0, 1, None]
    # word0 -> word0: mean over rows 1, 2 of (cols 1 + 2) = mean(6 + 7, 11 + 12) = 18
    # word0 -> word1: mean over rows 1, 2 of col 3       = mean(8, 13)          = 10.5
    # word1 -> word0: row 3, cols 1 + 2                  = 16 + 17              = 33
    # word1 -> word1: row 3, col 3                                              = 18
    # Rows/columns 0 and 4 (special tokens) must not contribute.
    expected = torch.tensor([[18.0, 10.5], [33.0, 18.0]])
    assert torch.equal(kw.word_attention(attn, word_ids, 2), expected)


def test_word_attention_batched_with_padding_matches_single():
    attn = torch.rand(2, 6, 6)
    ids = torch.tensor([[-1, 0, 1, 1, -1, -1], [-1, 0, 0, 1, 2, -1]])
    batched = kw.word_attention(attn, ids, 3)
    assert torch.allclose(batched[0, :2, :2], kw.word_attention(attn[0], [None, 0, 1, 1, None, None], 2))
    assert torch.allclose(batched[1], kw.word_attention(attn[1], [None, 0, 0, 1, 2, None], 3))
    assert batched[0, 2].abs().sum() == 0 and batched[0, :, 2].abs().sum() == 0  # no third word


# --------------------------------------------------------------------------- a hand-made word-level map

#            0      1        2          3      4         5     6        7
TOKENS = ["john", "smith", "visited", "the", "museum", "in", "paris", "today"]
TAGS = ["B-PER", "I-PER", "O", "O", "O", "O", "B-LOC", "O"]
CANDS = [False, False, True, False, True, False, False, True]  # 'the' and 'in' are stop words


def hand_attention() -> torch.Tensor:
    w = torch.zeros(8, 8)
    w[0, [1, 2, 3, 4, 6, 7]] = torch.tensor([5.0, 0.1, 0.9, 0.3, 0.6, 0.2])  # john
    w[1, [0, 2, 4, 6, 7]] = torch.tensor([3.0, 0.5, 0.1, 0.2, 0.2])         # smith
    w[6, [0, 1, 2, 4, 5, 6, 7]] = torch.tensor([0.25, 0.5, 0.0, 0.1, 2.0, 9.0, 0.4])  # paris
    return w


def test_entity_attention_means_rows_sums_columns_and_drops_self():
    ent = kw.entity_attention(hand_attention(), TAGS)
    assert ent.shape == (2, 8)
    # PER gives the mean of the john and smith rows: visited (0.1+0.5)/2, museum (0.3+0.1)/2, LOC (0.6+0.2)/2.
    assert ent[0, 2].item() == pytest.approx(0.3)
    assert ent[0, 4].item() == pytest.approx(0.2)
    assert ent[0, 6].item() == pytest.approx(0.4)
    # PER -> PER (john->smith 5.0, smith->john 3.0) is self-attention: zero.
    assert ent[0, 0].item() == 0 and ent[0, 1].item() == 0
    # LOC receives... and gives to the two-word PER the SUM of its columns: 0.25 + 0.5.
    assert ent[1, 0].item() == pytest.approx(0.75) and ent[1, 1].item() == pytest.approx(0.75)
    assert ent[1, 6].item() == 0  # paris -> paris 9.0 is dropped


def test_select_by_attention_hand_worked():
    # 5 non-entity words, p = 0.3 -> k = ceil(1.5) = 2.
    # PER over candidates: visited 0.3, museum 0.2, today 0.2 -> visited, then the museum/today tie
    #   goes to the earlier word (museum).  'the' (0.45) is a stop word, not a candidate.
    # LOC over candidates: today 0.4, museum 0.1, visited 0.0 -> today, museum ('in' 2.0 is no candidate).
    # Union: visited, museum, today.
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.3) == [2, 4, 7]
    # p = 0.2 -> k = ceil(1.0) = 1: PER visited, LOC today.
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.2) == [2, 7]
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.0) == []


def test_select_by_attention_without_entities_is_empty():
    assert kw.select_by_attention(torch.rand(3, 3), ["O", "O", "O"], [True] * 3, 0.5) == []


def test_released_rule_lets_other_entities_first_words_take_slots_hand_worked():
    # PER over candidates + paris (LOC's first word, summed column 0.4): paris 0.4, visited 0.3, museum 0.2,
    #   today 0.2 -> top 2 = paris, visited -> paris dropped -> visited.
    # LOC over candidates + john (PER's first word, carrying john + smith = 0.75): john 0.75, today 0.4,
    #   museum 0.1, visited 0.0 -> top 2 = john, today -> john dropped -> today.
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.3, rule="released") == [2, 7]
    # k = 1: each entity's only slot goes to the other entity, so no keyword at all.
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.2, rule="released") == []
    # p = 0: argpartition(row, -0)[-0:] is every index: every candidate.
    assert kw.select_by_attention(hand_attention(), TAGS, CANDS, 0.0, rule="released") == [2, 4, 7]


def test_released_rule_equals_paper_rule_with_one_entity():
    tags = ["O", "B-PER", "I-PER", "O", "O", "O"]
    attn = torch.rand(6, 6, generator=torch.Generator().manual_seed(0))
    mask = [True, False, False, True, True, True]
    for p in (0.2, 0.5, 1.0):
        assert kw.select_by_attention(attn, tags, mask, p, "released") == kw.select_by_attention(attn, tags, mask, p)


# --------------------------------------------------------------------------- candidates and k


def test_candidates_english_skip_entities_stop_words_and_punctuation():
    stop = kw.stopwords("en")
    tokens = ["The", "museum", ",", "in", "Paris", "$", "c++", "--"]
    tags = ["O", "O", "O", "O", "B-LOC", "O", "O", "O"]
    assert kw.candidates(tokens, tags, stop) == [False, True, False, False, False, False, True, False]


def test_the_released_rule_matches_stop_words_as_written():
    """generate-bert-attn.py tests ``t[0] in stopwords_all``: the lists are lower case, so ``The`` passes."""
    stop = kw.stopwords("en", "stopwordsiso_all")
    tokens, tags = ["The", "the", "museum"], ["O", "O", "O"]
    assert kw.candidates(tokens, tags, stop, "released") == [True, False, True]
    assert kw.candidates(tokens, tags, stop, "paper") == [False, False, True]


def test_candidates_hindi():
    stop = kw.stopwords("hi")
    tokens = ["राम", "ने", "संग्रहालय", "में", "किताब", "।"]
    tags = ["B-PER", "O", "O", "O", "O", "O"]
    assert "में" in stop and "ने" in stop
    assert kw.candidates(tokens, tags, stop) == [False, False, True, False, True, False]


@pytest.mark.parametrize("language", ["en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr", "zh"])
def test_every_multiconer_language_has_stop_words(language):
    assert len(kw.stopwords(language)) > 100


def test_unknown_language_warns_and_gives_no_stop_words(caplog):
    with caplog.at_level(logging.WARNING):
        assert kw.stopwords("xx") == frozenset()
    assert "xx" in caplog.text


def test_is_punctuation():
    assert all(kw.is_punctuation(w) for w in [".", "...", "«»", "—", "।", "$", "+"])
    assert not any(kw.is_punctuation(w) for w in ["a", "m73", "c++", "1965"])


def test_released_punctuation_is_any_ascii_punctuation_character():
    assert all(kw.is_punctuation(w, "released") for w in ["'s", "u.s.", "co-founded", "c++", ".", "a_b", "x~"])
    assert not any(kw.is_punctuation(w, "released") for w in ["।", "，", "«»", "—", "m73", "1965", "café"])


def test_the_released_stop_words_are_the_ten_languages_lists_joined():
    joined = kw.stopwords("en", "stopwordsiso_all")
    assert {"the", "und", "में", "и", "的"} <= joined
    assert joined == kw.stopwords("hi", "stopwordsiso_all")      # whatever the sentence's language
    assert kw.stopwords("en") < joined and kw.stopwords("en", "none") == frozenset()


@pytest.mark.parametrize("p, non_entity, cands, k", [
    (0.3, 5, 5, 2),     # ceil(1.5)
    (0.3, 10, 10, 3),   # exactly 3: no extra keyword
    (0.28, 25, 25, 7),  # 0.28 * 25 = 7.000000000000001 in floats: still 7
    (0.2, 5, 5, 1),
    (0.01, 5, 5, 1),    # any p > 0 keeps at least one
    (0.0, 5, 5, 0),
    (1.0, 5, 3, 3),     # capped by the candidates
    (0.5, 0, 0, 0),
])
def test_keyword_count(p, non_entity, cands, k):
    assert kw.keyword_count(p, non_entity, cands) == k


# --------------------------------------------------------------------------- random variant


def test_select_random_draws_count_candidates_once_per_sentence():
    tags = ["B-PER", "O", "O", "O", "B-LOC", "O", "O", "O", "O", "O", "O"]
    mask = [False, True, False, True, False, False, True, True, False, True, True]
    runs = [kw.select_random(tags, mask, 3, random.Random(seed)) for seed in range(20)]
    assert all(len(r) == 3 for r in runs)  # exactly the count asked for, not k per entity
    assert all(mask[i] for r in runs for i in r) and all(r == sorted(r) for r in runs)
    assert runs[0] == kw.select_random(tags, mask, 3, random.Random(0))
    assert len({tuple(r) for r in runs}) > 1
    assert kw.select_random(tags, mask, 0, random.Random(0)) == []


def test_select_random_released_allows_stop_words_and_sentences_without_entities():
    tokens = ["the", "band", "'s", "show", "in", "paris", "was", "loud", "."]
    tags = ["O", "O", "O", "O", "O", "B-LOC", "O", "O", "O"]
    # pool: non-entity words without ASCII punctuation: the band show in was loud (6) -> k = ceil(0.3 * 6) = 2
    picks = [kw.select_random_released(tokens, tags, 0.3, "released", random.Random(s)) for s in range(50)]
    assert all(len(p) == 2 and set(p) <= {0, 1, 3, 4, 6, 7} for p in picks)
    assert any(0 in p or 4 in p for p in picks)                      # stop words are allowed
    assert len(kw.select_random_released(["a", "b", "c"], ["O"] * 3, 0.5, "released", random.Random(0))) == 2


# --------------------------------------------------------------------------- layers


@pytest.mark.parametrize("spec, n, expected", [
    ("last1", 12, [11]), ("last4", 12, [8, 9, 10, 11]), ("all", 3, [0, 1, 2]),
    ("8-11", 24, [8, 9, 10, 11]), ("0-0", 4, [0]),
])
def test_layer_indices(spec, n, expected):
    assert kw.layer_indices(spec, n) == expected


@pytest.mark.parametrize("spec, n", [("8-11", 10), ("last4", 3), ("3-2", 12), ("-1-2", 12), ("top", 12)])
def test_layer_indices_rejects(spec, n):
    with pytest.raises(ValueError, match="layers="):
        kw.layer_indices(spec, n)


# --------------------------------------------------------------------------- batched extraction

TEXTS = [
    "john smith visited the old museum in paris today",
    "the m73 machine gun was designed as an interim weapon",
    "maria went to the market in madrid on a rainy monday morning",
    "acme corp sells phones",
    "nothing to see here",
    "a very long sentence about a museum " * 6,
]
SENTENCES = [
    TaggedSentence(TEXTS[0].split(), ["B-PER", "I-PER", "O", "O", "O", "O", "O", "B-LOC", "O"]),
    TaggedSentence(TEXTS[1].split(), ["O", "B-PROD", "I-PROD", "I-PROD"] + ["O"] * 6),
    TaggedSentence(TEXTS[2].split(), ["B-PER"] + ["O"] * 5 + ["B-LOC"] + ["O"] * 5),
    TaggedSentence(TEXTS[3].split(), ["B-CORP", "I-CORP", "O", "O"]),
    TaggedSentence(TEXTS[4].split(), ["O"] * 4),
    TaggedSentence(TEXTS[5].split(), ["O", "O", "O", "O", "O", "O", "B-LOC"] * 6),
]


@pytest.fixture(scope="module")
def tiny():
    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS, trainers.WordPieceTrainer(vocab_size=90, special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        unk_token="<unk>", model_max_length=128)
    torch.manual_seed(0)
    model = XLMRobertaModel(XLMRobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=16, num_hidden_layers=4,
                                             num_attention_heads=2, intermediate_size=32, pad_token_id=1,
                                             max_position_embeddings=130))
    return model, tokenizer


def _cfg(**overrides) -> KeywordConfig:
    values = dict(selection="attention", rule="paper", layers="last4", p=0.3, stopwords="stopwordsiso", batch_size=3,
                  max_subtokens=40)  # the last sentence has 44 sub-tokens, the others at most 34
    return KeywordConfig(**{**values, **overrides})


def test_tiny_model_splits_words_into_several_subtokens(tiny):
    _, tokenizer = tiny
    ids = tokenizer(SENTENCES[0].tokens, is_split_into_words=True).word_ids()
    assert ids[0] is None and ids[-1] is None and len(ids) > len(SENTENCES[0]) + 2


def test_extract_keywords_batched_equals_one_by_one(tiny):
    model, tokenizer = tiny
    model.train()
    batched, records, counts = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(), "en", "cpu", seed=0)
    single, single_records, _ = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(batch_size=1), "en", "cpu", 0)
    assert model.training  # the caller's mode is restored
    assert batched == single
    for a, b in zip(records, single_records):
        assert a["scores"].keys() == b["scores"].keys()
        assert all(a["scores"][i] == pytest.approx(b["scores"][i], rel=1e-4, abs=1e-6) for i in a["scores"])
    assert counts == {"sentences": 6, "with_keywords": 4, "keywords": sum(map(len, batched)), "no_entity": 1,
                      "too_long": 1, "failed": 0}
    assert [r["status"] for r in records] == ["ok", "ok", "ok", "ok", "no_entity", "too_long"]
    # Keywords are candidates, at most k per entity, and scored.
    stop = kw.stopwords("en")
    for sentence, keys, record in zip(SENTENCES[:4], batched[:4], records):
        mask = kw.candidates(sentence.tokens, sentence.tags, stop)
        k = kw.keyword_count(0.3, sum(t == "O" for t in sentence.tags), sum(mask))
        assert keys and all(mask[i] for i in keys) and len(keys) <= k * len(sentence.spans())
        assert set(keys) <= set(record["scores"]) == {i for i, ok in enumerate(mask) if ok}


def test_extract_keywords_matches_a_direct_forward(tiny):
    model, tokenizer = tiny
    sentence = SENTENCES[2]
    enc = tokenizer(sentence.tokens, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        attentions = model(**enc, output_attentions=True).attentions
    attn = sum(a[0].sum(dim=0) for a in attentions)  # "all" layers, all heads
    words = kw.word_attention(attn, enc.word_ids(), len(sentence))
    mask = kw.candidates(sentence.tokens, sentence.tags, kw.stopwords("en"))
    expected = kw.select_by_attention(words, sentence.tags, mask, 0.3)
    keys, _, _ = kw.extract_keywords(model, tokenizer, [sentence], _cfg(layers="all"), "en", "cpu", 0)
    assert keys == [expected]


def test_a_failing_sentence_is_counted_and_the_rest_still_run(tiny, monkeypatch, caplog):
    model, tokenizer = tiny
    real_forward = kw._forward

    def flaky(model, input_ids, word_ids, num_words, *args):
        if len(SENTENCES[1]) in num_words:
            raise RuntimeError("boom")
        return real_forward(model, input_ids, word_ids, num_words, *args)

    monkeypatch.setattr(kw, "_forward", flaky)
    good, _, _ = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(batch_size=1), "en", "cpu", 0)
    keys, records, counts = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(), "en", "cpu", 0)
    assert counts["failed"] == 1 and records[1]["status"] == "failed" and keys[1] == []
    assert keys[:1] + keys[2:] == good[:1] + good[2:]
    assert "boom" in caplog.text
    with pytest.raises(RuntimeError, match="all 1 sentences"):
        kw.extract_keywords(model, tokenizer, [SENTENCES[1]], _cfg(), "en", "cpu", 0)


def test_random_is_a_matched_control_of_attention(tiny):
    model, tokenizer = tiny
    chosen, _, _ = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(), "en", "cpu", 7)
    drawn, records, counts = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(selection="random"), "en", "cpu", 7)
    again, _, _ = kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(selection="random"), "en", "cpu", 7)
    assert drawn == again and [len(k) for k in drawn] == [len(k) for k in chosen]
    stop = kw.stopwords("en")
    assert all(kw.candidates(s.tokens, s.tags, stop)[i] for s, keys in zip(SENTENCES, drawn) for i in keys)
    draws = [kw.extract_keywords(model, tokenizer, SENTENCES, _cfg(selection="random"), "en", "cpu", seed)[0]
             for seed in range(8)]
    assert any(d != chosen for d in draws)
    assert counts["no_entity"] == 1 and counts["too_long"] == 1


def test_released_random_and_none_never_touch_the_model():
    cfg = _cfg(selection="random_released", rule="released")
    keys, records, counts = kw.extract_keywords(None, None, SENTENCES, cfg, "en", "cpu", 7)
    assert keys == kw.extract_keywords(None, None, SENTENCES, cfg, "en", "cpu", 7)[0]
    assert keys[4] and records[4]["status"] == "no_entity"          # sentences without entities too
    none, _, counts = kw.extract_keywords(None, None, SENTENCES, _cfg(selection="none"), "en", "cpu", 7)
    assert none == [[]] * 6 and counts["with_keywords"] == 0
