"""Perplexity under the tiny GPT-2: finite, equal to the model's own loss, independent of batching."""

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from aclm.base.paths import PROJECT_ROOT
from aclm.tables.perplexity import perplexity, token_nlls

TEXTS = ["the sun rises over the river bank", "john smith", "",
         "lionel logue was an australian speech therapist", "paris", "a b c d e f g h i j k l"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> str:
    shipped = PROJECT_ROOT / "models" / "tiny" / "gpt2"
    if shipped.exists():
        return str(shipped)
    from tools.tiny_models import build_tiny_models

    out = tmp_path_factory.mktemp("tiny")
    build_tiny_models(out, seed=0)
    return str(out / "gpt2")


def test_finite_and_empty_text_is_skipped(gpt2):
    scored = token_nlls(TEXTS, gpt2, batch_size=4, device="cpu")
    assert scored[2] == (0.0, 0)
    assert all(n > 0 and math.isfinite(s) for i, (s, n) in enumerate(scored) if i != 2)
    for mode in ("sentence", "corpus"):
        value = perplexity(TEXTS, gpt2, batch_size=4, device="cpu", mode=mode)
        assert math.isfinite(value) and value > 1
    assert perplexity([""], gpt2, device="cpu") is None


def test_batched_equals_one_by_one(gpt2):
    batched = token_nlls(TEXTS, gpt2, batch_size=len(TEXTS), device="cpu")
    single = [token_nlls([t], gpt2, batch_size=1, device="cpu")[0] for t in TEXTS]
    assert [n for _, n in batched] == [n for _, n in single]
    assert [s for s, _ in batched] == pytest.approx([s for s, _ in single], rel=1e-5)
    assert perplexity(TEXTS, gpt2, batch_size=2, device="cpu") == pytest.approx(
        perplexity(TEXTS, gpt2, batch_size=32, device="cpu"), rel=1e-5)


def test_sentence_perplexity_is_the_models_own_loss(gpt2):
    tokenizer, model = AutoTokenizer.from_pretrained(gpt2), AutoModelForCausalLM.from_pretrained(gpt2).eval()
    text = TEXTS[0]
    ids = torch.tensor([[tokenizer.bos_token_id] + tokenizer(text)["input_ids"]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss.item()
    assert perplexity([text], gpt2, device="cpu") == pytest.approx(math.exp(loss), rel=1e-5)


def test_sentence_and_corpus_pooling(gpt2):
    scored = [x for x in token_nlls(TEXTS, gpt2, device="cpu") if x[1]]
    mean_of_sentences = sum(math.exp(s / n) for s, n in scored) / len(scored)
    corpus = math.exp(sum(s for s, _ in scored) / sum(n for _, n in scored))
    assert perplexity(TEXTS, gpt2, device="cpu", mode="sentence") == pytest.approx(mean_of_sentences)
    assert perplexity(TEXTS, gpt2, device="cpu", mode="corpus") == pytest.approx(corpus)
    with pytest.raises(ValueError, match="mode"):
        perplexity(TEXTS, gpt2, mode="token")
