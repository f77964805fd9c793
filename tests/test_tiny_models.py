"""The tiny offline models behave like the real checkpoints they stand in for."""

import math

import pytest
import torch
from transformers import (AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer,
                          GPT2Config, GPT2LMHeadModel, MBartConfig, MBartForConditionalGeneration, XLMRobertaConfig,
                          XLMRobertaForMaskedLM)

from tools.tiny_models import (
    DEFAULT_TEXT_DIR,
    MBART50_LANGUAGE_CODES,
    PAPER_SHAPE_SPECS,
    SPECS,
    build_code,
    build_tiny_models,
    collect_text_files,
    is_up_to_date,
    read_sentences,
)

LABEL_TOKENS = ["<b-per>", "<i-per>", "<b-cw>", "<i-cw>"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    manifest, rebuilt = build_tiny_models(out, seed=0)
    assert rebuilt
    return out, manifest


@pytest.fixture(scope="module")
def mbart(built):
    path = built[0] / "mbart-large-50"
    return AutoTokenizer.from_pretrained(path), AutoModelForSeq2SeqLM.from_pretrained(path)


def test_manifest_and_up_to_date(built):
    out, manifest = built
    assert sorted(manifest["models"]) == sorted(SPECS)
    assert manifest["seed"] == 0
    assert "data/sample/en/train.conll" in manifest["text_files"]
    assert all(m["parameters"] > 0 and m["bytes"] > 0 for m in manifest["models"].values())
    files = collect_text_files([DEFAULT_TEXT_DIR])
    assert is_up_to_date(out, files, seed=0)
    assert not is_up_to_date(out, files, seed=1)
    again, rebuilt = build_tiny_models(out, seed=0)
    assert not rebuilt and again == manifest
    assert manifest["code"] == build_code() and set(manifest["code"]) == {"tools.tiny_models"}


def test_a_build_made_by_other_code_or_from_other_text_as_read_is_not_current(built, monkeypatch):
    out, _ = built
    files = collect_text_files([DEFAULT_TEXT_DIR])
    with monkeypatch.context() as m:
        m.setattr("tools.tiny_models.build_code", lambda: {"tools.tiny_models": "edited"})
        assert not is_up_to_date(out, files, seed=0)
    with monkeypatch.context() as m:
        m.setattr("tools.tiny_models.read_sentences", lambda files: read_sentences(files)[:-1])
        assert not is_up_to_date(out, files, seed=0)
    assert is_up_to_date(out, files, seed=0)


def test_same_seed_same_bytes_other_seed_other_weights(built, tmp_path):
    out, _ = built
    build_tiny_models(tmp_path / "same", seed=0)
    for file in sorted(p for p in out.rglob("*") if p.is_file()):
        assert (tmp_path / "same" / file.relative_to(out)).read_bytes() == file.read_bytes(), file
    build_tiny_models(tmp_path / "other", seed=1)
    for name in SPECS:  # the seed draws the weights; the tokenizers depend on the text only
        other, same = tmp_path / "other" / name, out / name
        assert (other / "model.safetensors").read_bytes() != (same / "model.safetensors").read_bytes()
        assert (other / "tokenizer.json").read_bytes() == (same / "tokenizer.json").read_bytes()


def test_text_sources(tmp_path):
    plain = tmp_path / "extra.txt"
    plain.write_text("first line here\n\n  second line  \n", encoding="utf-8")
    files = collect_text_files([DEFAULT_TEXT_DIR, plain])
    assert plain.resolve() in files and len(files) == 7
    sentences = read_sentences(files)
    assert {"first line here", "second line"} <= set(sentences)
    assert "marta kowalczyk played the lead in the silent harbor" in sentences
    with pytest.raises(FileNotFoundError):
        collect_text_files([tmp_path / "missing"])


def test_xlm_roberta_tokenizer_follows_xlmr_conventions(built):
    tok = AutoTokenizer.from_pretrained(built[0] / "xlm-roberta")
    assert type(tok).__name__ == "XLMRobertaTokenizerFast"
    assert [tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id] == [0, 1, 2, 3]
    assert tok.mask_token_id == len(tok) - 1
    words = ["marta", "kowalczyk", "played", "in", "zürich"]
    enc = tok(words, is_split_into_words=True)
    assert enc.input_ids[0] == tok.bos_token_id and enc.input_ids[-1] == tok.eos_token_id
    word_ids = enc.word_ids()
    assert word_ids[0] is None and word_ids[-1] is None
    assert sorted(set(word_ids[1:-1])) == list(range(len(words)))
    assert tok.convert_ids_to_tokens(tok("the <mask> played").input_ids)[2] == "<mask>"
    assert tok.decode(tok("the band played in oslo").input_ids, skip_special_tokens=True) == "the band played in oslo"
    assert tok.unk_token_id not in tok("Hello, World! 42").input_ids

    assert tok.add_special_tokens({"additional_special_tokens": LABEL_TOKENS}) == len(LABEL_TOKENS)
    tokens = tok.convert_ids_to_tokens(tok("<b-per> marta <i-per> is here").input_ids)
    assert tokens[1] == "<b-per>" and "<i-per>" in tokens


def test_xlm_roberta_models_load_and_expose_attention(built):
    path = built[0] / "xlm-roberta"
    tok = AutoTokenizer.from_pretrained(path)
    encoder = AutoModel.from_pretrained(path)
    assert type(encoder).__name__ == "XLMRobertaModel"
    mlm = AutoModelForMaskedLM.from_pretrained(path)
    assert mlm.config.vocab_size == len(tok) and mlm.config.num_hidden_layers == 12
    batch = tok(["the band played in oslo", "hi"], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = mlm(**batch, output_attentions=True)
    assert out.logits.shape == (*batch.input_ids.shape, len(tok))
    assert len(out.attentions) == 12
    assert out.attentions[8].shape == (2, 2, batch.input_ids.shape[1], batch.input_ids.shape[1])
    tok.add_special_tokens({"additional_special_tokens": LABEL_TOKENS})
    mlm.resize_token_embeddings(len(tok))
    assert mlm.get_input_embeddings().num_embeddings == len(tok)


def test_flair_embeds_with_tiny_xlm_roberta(built):
    from flair.data import Sentence
    from flair.embeddings import TransformerWordEmbeddings

    embeddings = TransformerWordEmbeddings(
        str(built[0] / "xlm-roberta"), fine_tune=True, layers="-1", subtoken_pooling="first"
    )
    sentence = Sentence("marta kowalczyk played in the silent harbor")
    embeddings.embed(sentence)
    assert embeddings.embedding_length == 32
    assert all(token.embedding.shape == (32,) for token in sentence)


def test_mbart50_tokenizer_matches_mbart50_conventions(mbart):
    tok, model = mbart
    assert type(tok).__name__ == "MBart50TokenizerFast"
    assert len(MBART50_LANGUAGE_CODES) == 52 and len(tok.lang_code_to_id) == 52
    ids = [tok.lang_code_to_id[code] for code in MBART50_LANGUAGE_CODES]
    assert ids == list(range(ids[0], ids[0] + 52))  # contiguous, right after the pieces
    assert tok.convert_ids_to_tokens(ids) == list(MBART50_LANGUAGE_CODES)
    assert tok.convert_tokens_to_ids("de_DE") == tok.lang_code_to_id["de_DE"]
    assert tok.mask_token_id == ids[-1] + 1 == len(tok) - 1
    assert tok.src_lang == "en_XX"

    tok.src_lang, tok.tgt_lang = "de_DE", "en_XX"
    enc = tok("die band spielte", text_target="the band played")
    assert enc.input_ids[0] == tok.lang_code_to_id["de_DE"] and enc.input_ids[-1] == tok.eos_token_id
    assert enc.labels[0] == tok.lang_code_to_id["en_XX"] and enc.labels[-1] == tok.eos_token_id
    assert tok.decode(enc.input_ids, skip_special_tokens=True) == "die band spielte"
    tok.src_lang = "en_XX"
    assert tok("x").input_ids[0] == tok.lang_code_to_id["en_XX"]

    config = model.config
    assert config.vocab_size == len(tok)
    assert config.decoder_start_token_id == config.eos_token_id == tok.eos_token_id
    assert config.pad_token_id == tok.pad_token_id


def test_mbart50_generates_with_forced_language(mbart):
    tok, model = mbart
    tok.src_lang = "en_XX"
    batch = tok(["<mask> played in oslo", "the band <mask>"], return_tensors="pt", padding=True)
    en = tok.convert_tokens_to_ids("en_XX")
    torch.manual_seed(0)
    out = model.generate(**batch, forced_bos_token_id=en, do_sample=True, top_k=10, num_beams=5, max_length=100)
    assert out.shape[0] == 2 and out.shape[1] <= 100
    assert (out[:, 0] == model.config.decoder_start_token_id).all()
    assert (out[:, 1] == en).all()
    labels = tok(text_target=["the band played", "a band"], return_tensors="pt", padding=True).input_ids
    assert math.isfinite(model(**batch, labels=labels).loss.item())


def test_sbert_encodes(built):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(built[0] / "sbert"), device="cpu")
    vectors = model.encode(["the band played in oslo", "die band spielte", "x"])
    assert vectors.shape == (3, 32) == (3, model.get_sentence_embedding_dimension())
    assert all(math.isfinite(v) for v in vectors.ravel())


def test_gpt2_scores_a_sentence(built):
    path = built[0] / "gpt2"
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert type(tok).__name__ == "GPT2TokenizerFast" and type(model).__name__ == "GPT2LMHeadModel"
    assert model.config.vocab_size == len(tok) and tok.eos_token == "<|endoftext|>"
    text = "the band played in Oslo, 1999!"
    ids = tok(text, return_tensors="pt").input_ids
    assert tok.decode(ids[0]) == text
    with torch.no_grad():
        loss = model(ids, labels=ids).loss
    assert math.isfinite(loss.item()) and loss.item() > 0


# The parameter counts of the real checkpoints (embeddings, encoder, heads as their
# from_pretrained classes build them), computed on the meta device: nothing is allocated.
PAPER_PARAMETERS = {
    "xlm-roberta": (XLMRobertaConfig, XLMRobertaForMaskedLM, 560_142_482),        # xlm-roberta-large
    "xlm-roberta-base": (XLMRobertaConfig, XLMRobertaForMaskedLM, 278_295_186),
    "mbart-large-50": (MBartConfig, MBartForConditionalGeneration, 610_879_488),
    "gpt2": (GPT2Config, GPT2LMHeadModel, 124_439_808),
}


@pytest.mark.parametrize("name", sorted(PAPER_PARAMETERS))
def test_paper_shape_specs_have_the_real_checkpoints_sizes(name):
    config_class, model_class, parameters = PAPER_PARAMETERS[name]
    spec = PAPER_SHAPE_SPECS[name]
    vocab = {"vocab_size": spec["embedding_rows"]}
    with torch.device("meta"):
        model = model_class(config_class(**vocab, **spec["config"]))
    assert sum(p.numel() for p in model.parameters()) == parameters


def test_the_sentence_embedder_has_distiluse_dimensions():
    spec = PAPER_SHAPE_SPECS["sbert"]
    assert (spec["embedding_rows"], spec["config"]["hidden_size"], spec["config"]["num_hidden_layers"],
            spec["dense_features"]) == (119_547, 768, 6, 512)
