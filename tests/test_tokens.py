"""The one token-adding helper (aclm.base.tokens.add_tokens), on hand-computed embeddings."""

from __future__ import annotations

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from aclm.base.tokens import add_tokens


class WordTokenizer:
    """A whitespace tokenizer over a fixed vocabulary, with the calls add_tokens makes."""

    def __init__(self, words: list[str]) -> None:
        self.vocab = {w: i for i, w in enumerate(words)}
        self.additional_special_tokens: list[str] = ["<old>"]
        self.calls: list[dict] = []

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def add_special_tokens(self, special: dict, replace_additional_special_tokens: bool = True) -> int:
        self.calls.append({"special": special, "replace": replace_additional_special_tokens})
        for token in special["additional_special_tokens"]:
            self.vocab.setdefault(token, len(self.vocab))
        return len(special["additional_special_tokens"])

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [self.vocab[w] for w in text.split()]}

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.vocab[token]


class EmbeddingModel(torch.nn.Module):
    """Row i of the input embeddings is [i, 10 i]; a resize appends rows of -1."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.embeddings = torch.nn.Embedding(size, 2)
        with torch.no_grad():
            self.embeddings.weight.copy_(torch.tensor([[i, 10.0 * i] for i in range(size)]))
        self.resizes: list[int] = []

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embeddings

    def resize_token_embeddings(self, size: int) -> None:
        self.resizes.append(size)
        old = self.embeddings.weight.data
        grown = torch.nn.Embedding(size, 2)
        with torch.no_grad():
            grown.weight.fill_(-1.0)
            grown.weight[:len(old)] = old
        self.embeddings = grown


def test_new_tokens_start_at_the_mean_of_their_init_words():
    tokenizer = WordTokenizer(["<pad>", "<old>", "creative", "work", "person"])   # ids 0..4
    model = EmbeddingModel(5)
    added = add_tokens(model, tokenizer, ["<b-cw>", "<old>", "<b-per>", "<x>", "<b-cw>"],
                       {"<b-cw>": "creative work", "<b-per>": "person", "<old>": "person"})
    assert added == ["<b-cw>", "<b-per>", "<x>"]                       # only the missing ones, once each
    assert tokenizer.calls == [{"special": {"additional_special_tokens": ["<b-cw>", "<b-per>", "<x>"]},
                                "replace": False}]                      # existing specials are kept
    assert model.resizes == [8]                                         # one resize, to the new vocabulary
    emb = model.get_input_embeddings().weight
    assert emb[5].tolist() == [2.5, 25.0]      # <b-cw>: mean of creative (2, 20) and work (3, 30)
    assert emb[6].tolist() == [4.0, 40.0]      # <b-per>: person (4, 40)
    assert emb[7].tolist() == [-1.0, -1.0]     # <x>: no init words, the resize's rows
    assert emb[1].tolist() == [1.0, 10.0]      # <old> was there already: untouched


def test_a_matrix_with_spare_rows_is_never_shrunk():
    tokenizer = WordTokenizer(["<pad>", "person"])                       # 2 tokens over 6 rows
    model = EmbeddingModel(6)
    add_tokens(model, tokenizer, ["<b-per>", "<i-per>"], {"<b-per>": "person"})
    assert model.resizes == [] and model.get_input_embeddings().num_embeddings == 6
    assert model.get_input_embeddings().weight[2].tolist() == [1.0, 10.0]   # <b-per> (id 2): person
    assert model.get_input_embeddings().weight[3].tolist() == [3.0, 30.0]   # <i-per>: the spare row as it was


def test_nothing_to_add_changes_nothing():
    tokenizer = WordTokenizer(["<pad>", "<b-per>"])
    model = EmbeddingModel(2)
    assert add_tokens(model, tokenizer, ["<b-per>"], {"<b-per>": "<pad>"}) == []
    assert tokenizer.calls == [] and model.resizes == []
    assert model.get_input_embeddings().weight[1].tolist() == [1.0, 10.0]


def test_a_real_tokenizer_keeps_new_tokens_whole_and_its_earlier_specials(tiny_models):
    path = str(tiny_models / "xlm-roberta")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForMaskedLM.from_pretrained(path)
    before = len(tokenizer)
    assert len(tokenizer.tokenize("<b-per>")) > 1                      # split before
    assert add_tokens(model, tokenizer, ["<b-per>"], {"<b-per>": "person"}) == ["<b-per>"]
    first = model.get_input_embeddings().weight[tokenizer.convert_tokens_to_ids("<b-per>")].clone()
    assert add_tokens(model, tokenizer, ["<de>", "<b-per>"]) == ["<de>"]
    assert {"<b-per>", "<de>"} <= set(tokenizer.additional_special_tokens)
    assert len(tokenizer) == before + 2 == model.get_input_embeddings().num_embeddings
    pieces = tokenizer.tokenize("went <de> <b-per> anna <b-per>")
    assert pieces.count("<b-per>") == 2 and pieces.count("<de>") == 1
    emb = model.get_input_embeddings().weight
    assert torch.equal(emb[tokenizer.convert_tokens_to_ids("<b-per>")], first)   # not re-initialised
    ids = tokenizer("person", add_special_tokens=False)["input_ids"]
    assert torch.allclose(first, emb[ids].mean(dim=0))
