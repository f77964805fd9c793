"""The real 250k-piece XLM-R / mBART-50 vocabulary (tools/real_vocab.py), in the ten MultiCoNER languages.

The tiny models elsewhere have 2k-8k pieces learnt from English; what the real vocabulary does to Chinese or
Korean (normalised punctuation, ``<unk>``, label tokens, the embedding resize) is tested here, on tiny
random models that carry it.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, read_conll
from aclm.base.text import normal_form
from aclm.steps.generation import Job, decode_jobs, decode_keeping_labels
from aclm.steps.generator import add_label_tokens, cut_targets, language_code, set_language
from aclm.steps.labels import label_tokens, label_words, linearize, parse_generation
from aclm.steps.postprocess import filter_augmentations
from aclm.steps.screening import MalformedGeneration
from aclm.steps.templates import render, skeleton
from tools.real_vocab import MBART50_ROWS, PIECES

LANGUAGES = ("en", "bn", "hi", "de", "es", "ko", "nl", "ru", "tr", "zh")
TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]


@pytest.fixture(scope="module")
def xlmr(real_vocab):
    return AutoTokenizer.from_pretrained(real_vocab / "xlm-roberta")


@pytest.fixture(scope="module")
def mbart(real_vocab):
    return AutoTokenizer.from_pretrained(real_vocab / "mbart-large-50")


@pytest.fixture(scope="module")
def generator(real_vocab):
    """The tiny mBART-50 with the label tokens added (the resize of a 250,054-row matrix), and its tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(real_vocab / "mbart-large-50")
    model = AutoModelForSeq2SeqLM.from_pretrained(real_vocab / "mbart-large-50")
    before = model.get_input_embeddings().weight.detach().clone()
    add_label_tokens(model, tokenizer, TYPES, {})
    return model, tokenizer, before


def first_with_entities(shared_data, language: str, count: int = 3) -> list[TaggedSentence]:
    sentences = read_conll(shared_data / "multiconer" / language / "train_100.conll")
    return [s for s in sentences if s.spans()][:count]


def test_the_pieces_are_numbered_as_the_hub_tokenizers_number_them(xlmr, mbart, real_vocab):
    assert len(xlmr) == PIECES and xlmr("Hello world!").input_ids == [0, 35378, 8999, 38, 2]
    assert xlmr.convert_ids_to_tokens([4, 5, 6, 8]) == [",", ".", "▁", "▁de"]
    assert len(mbart) == MBART50_ROWS
    assert mbart.convert_tokens_to_ids(["en_XX", "zh_CN", "<mask>"]) == [250004, 250025, 250053]
    model = AutoModelForSeq2SeqLM.from_pretrained(real_vocab / "mbart-large-50")
    assert model.get_input_embeddings().num_embeddings == MBART50_ROWS


def test_normal_form_is_the_tokenizers_normalisation_on_every_bmp_character(mbart):
    normalise = mbart.backend_tokenizer.normalizer.normalize_str
    differ = [hex(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000
              and unicodedata.category(chr(c)) != "Cn"     # unassigned in this Python's tables: NFKC leaves it
              and normal_form([f"a{chr(c)}b"]) != tuple(normalise(f"a{chr(c)}b").split())]
    assert differ == ["0x344"]           # two combining marks NFKC orders the other way
    assert normal_form(["，：；！（）", "№5", "km²", "…"]) == (",:;!()", "No5", "km2", "...")


def test_decoding_returns_text_normalised_so_a_zh_copy_is_caught_by_s6(generator, shared_data):
    model, tokenizer, _ = generator
    set_language(tokenizer, language_code(tokenizer, "zh"))
    source = next(s for s in read_conll(shared_data / "multiconer" / "zh" / "train_100.conll")
                  if s.spans() and {"，", "（", "）", "：", "！"} & set(s.tokens))
    keep = set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES)))
    ids = tokenizer(text_target=" ".join(linearize(source.tokens, source.tags))).input_ids
    copy = parse_generation(decode_keeping_labels(tokenizer, ids, keep), TYPES)   # a perfect copy, decoded
    assert copy.tokens != source.tokens                                           # full-width punctuation is ASCII now
    assert normal_form(copy.tokens) == normal_form(source.tokens)
    cfg = load_config(["profile=tiny"]).postprocess
    kept, counts = filter_augmentations([(copy, [source])], cfg)
    assert not kept and counts["copy_of_source"] == 1


def test_an_entity_that_lost_characters_to_unk_gets_a_status_of_its_own(generator):
    model, tokenizer, _ = generator
    set_language(tokenizer, language_code(tokenizer, "ko"))
    sentence = TaggedSentence(["묀헨글라트바흐", "에", "갔다"], ["B-LOC", "O", "O"])
    ids = tokenizer(text_target=" ".join(linearize(sentence.tokens, sentence.tags))).input_ids
    assert tokenizer.unk_token_id in ids
    keep = set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES))) | {tokenizer.unk_token_id}
    with pytest.raises(MalformedGeneration) as err:
        parse_generation(decode_keeping_labels(tokenizer, ids, keep), TYPES)
    assert err.value.status == "malformed_lost_characters"
    # decoded the released way, the <unk> is dropped and the entity silently shortened
    released = decode_keeping_labels(tokenizer, ids, keep - {tokenizer.unk_token_id})
    assert parse_generation(released, TYPES).tokens[0] == "헨글라트바흐"


def test_the_label_tokens_resize_a_250054_row_matrix_starting_each_row_from_its_words(generator):
    model, tokenizer, before = generator
    rows = model.get_input_embeddings().weight
    assert rows.shape[0] == MBART50_ROWS + 2 * len(TYPES) == len(tokenizer)
    assert torch.equal(rows[:MBART50_ROWS], before)                  # the old rows untouched
    for offset, token in enumerate(label_tokens(TYPES)):
        assert tokenizer.convert_tokens_to_ids(token) == MBART50_ROWS + offset
        words = tokenizer(label_words(token[1:-1], {}), add_special_tokens=False).input_ids
        assert torch.allclose(rows[MBART50_ROWS + offset], before[words].mean(dim=0))


def test_s4_counts_the_targets_its_length_limit_cuts_and_those_cut_inside_a_label_pair(generator):
    _, tokenizer, _ = generator
    set_language(tokenizer, "zh_CN")
    # zh_CN <b-loc> ▁ 北 ▁ 京 <b-loc> ▁ 很 ▁大 ... </s>: a character between spaces is two pieces
    targets = ["<b-loc> 北 京 <b-loc> 很 大 的 城 市", "我 是 <b-per> 李 白 <b-per>", "你 好"]
    assert cut_targets(tokenizer, targets, 8, label_tokens(TYPES)) == {"cut": 2, "cut_inside_label_pair": 1}
    assert cut_targets(tokenizer, targets, 7, label_tokens(TYPES)) == {"cut": 2, "cut_inside_label_pair": 2}
    assert cut_targets(tokenizer, targets, 17, label_tokens(TYPES)) == {"cut": 0, "cut_inside_label_pair": 0}


@pytest.mark.parametrize("language", LANGUAGES)
def test_label_tokens_are_single_and_the_language_code_frames_each_sequence(generator, shared_data, language):
    _, tokenizer, _ = generator
    code = language_code(tokenizer, language)
    set_language(tokenizer, code)
    labels = set(label_tokens(TYPES))
    for sentence in first_with_entities(shared_data, language):
        target = linearize(sentence.tokens, sentence.tags)
        for ids in (tokenizer(" ".join(target)).input_ids, tokenizer(text_target=" ".join(target)).input_ids):
            assert ids[0] == tokenizer.convert_tokens_to_ids(code) and ids[-1] == tokenizer.eos_token_id
            pieces = tokenizer.convert_ids_to_tokens(ids)
            assert Counter(p for p in pieces if p in labels) == Counter(w for w in target if w in labels)


@pytest.mark.parametrize("language", LANGUAGES)
def test_constrained_decoding_gives_back_each_templates_entities(generator, shared_data, language):
    model, tokenizer, _ = generator
    sentences = first_with_entities(shared_data, language, count=2)
    jobs = [Job(i, 0, None, render(skeleton(s, []), tokenizer.mask_token)) for i, s in enumerate(sentences)]
    cfg = load_config(["profile=tiny", "generation.constrained=entities", "generation.num_beams=2",
                       "generation.max_length=64"]).generation
    code = language_code(tokenizer, language)
    set_language(tokenizer, code)                   # as load_generator leaves it
    for job, text in zip(jobs, decode_jobs(model, tokenizer, jobs, cfg, label_tokens(TYPES), [code] * len(jobs),
                                           1, torch.device("cpu"))[0]):
        source = sentences[job.source]
        words = [w for a, b, _ in source.spans() for w in source.tokens[a:b]]
        if tokenizer.unk_token_id in tokenizer(" ".join(words), add_special_tokens=False).input_ids:
            with pytest.raises(MalformedGeneration, match="lost_characters"):
                parse_generation(text, TYPES)
            continue
        got = parse_generation(text, TYPES)
        assert [(normal_form(got.tokens[a:b]), t) for a, b, t in got.spans()] == \
               [(normal_form(source.tokens[a:b]), t) for a, b, t in source.spans()], (job.template, text)


# --------------------------------------------------------------------------- generator.label_init: released

@pytest.mark.slow
def test_the_released_order_pairs_a_types_b_and_i_tokens_as_documented():
    """Over hash seeds 0-199, the released line 62's order gives 114 runs in which no type's <b-x> and <i-x>
    start from the same word, 0.56 such types on average (docs/reference-code.md)."""
    from aclm.steps.label_init import RELEASED_TOKENS, released_order

    tokens = sorted(RELEASED_TOKENS)
    shared = []
    for seed in range(200):
        order = released_order(tokens, seed)
        word = {t: (len(order) - order.index(t) - 1) % 6 for t in order}        # row -k takes id (k - 1) % 6
        shared.append(sum(word[f"<b-{t}>"] == word[f"<i-{t}>"] for t in ("corp", "cw", "grp", "loc", "per", "prod")))
    assert released_order(tokens, 7) == released_order(tokens, 7) != released_order(tokens, 8)
    assert shared.count(0) == 114 and round(sum(shared) / 200, 2) == 0.56


def test_released_label_init_draws_on_the_released_ids(real_vocab):
    from aclm.steps.label_init import RELEASED_IDS, add_released, released_order

    tokenizer = AutoTokenizer.from_pretrained(real_vocab / "mbart-large-50")
    model = AutoModelForSeq2SeqLM.from_pretrained(real_vocab / "mbart-large-50")
    before = model.get_input_embeddings().weight.detach().clone()
    add_released(model, tokenizer, TYPES, seed=3)
    weight = model.get_input_embeddings().weight.detach()
    assert weight.shape[0] == MBART50_ROWS + 12 and torch.equal(weight[:MBART50_ROWS], before)
    order = released_order(label_tokens(TYPES), 3)
    assert tokenizer.convert_tokens_to_ids(order) == list(range(MBART50_ROWS, MBART50_ROWS + 12))
    noise = torch.stack([weight[MBART50_ROWS + 12 - k] - 2 * before[RELEASED_IDS[(k - 1) % 6]] for k in range(1, 13)])
    assert 0.015 < noise.std().item() < 0.025 and abs(noise.mean().item()) < 0.005
    with pytest.raises(ValueError, match="MultiCoNER's 12 label tokens"):
        add_released(model, tokenizer, ["GENE"], seed=3)


@pytest.mark.slow
def test_an_earlier_builds_vocabulary_file_builds_the_same_models_and_no_other_file_is_taken(real_vocab, tmp_path):
    """What an offline GPU node without the package does: the GPU bundle carries the vocabulary file."""
    import hashlib

    from tools.real_vocab import MissingVocabulary, build
    from tools.tiny_models import SPM_FILE

    _, rebuilt = build(tmp_path / "copy", vocabulary=real_vocab / "xlm-roberta" / SPM_FILE)
    assert rebuilt
    for name in ("xlm-roberta/" + SPM_FILE, "xlm-roberta/model.safetensors", "mbart-large-50/model.safetensors"):
        digests = {hashlib.sha256((folder / name).read_bytes()).hexdigest() for folder in (real_vocab, tmp_path / "copy")}
        assert len(digests) == 1, name
    other = tmp_path / "other.model"
    other.write_bytes((real_vocab / "xlm-roberta" / SPM_FILE).read_bytes()[:-1])
    with pytest.raises(MissingVocabulary, match="is not the rebuilt vocabulary's"):
        build(tmp_path / "refused", vocabulary=other)
