"""S5 (mixner planning, retrieval, decoding) and S6 (filters) on hand-checked cases."""

from __future__ import annotations

from statistics import NormalDist

import pytest
import torch
from omegaconf import OmegaConf

from aclm.base.data import TaggedSentence
from aclm.steps.generation import Job, build_jobs, decode_keeping_labels, nearest_neighbours, plan_partners, screen
from aclm.steps.postprocess import filter_augmentations, similarity
from aclm.steps.labels import parse_generation
from aclm.steps.screening import MalformedGeneration, zero_counts
from aclm.steps.templates import Piece


def mixner(mode, **kw):
    return OmegaConf.create({"mode": mode, "beta": 0.7, "gamma_sigma": 0.25, "code_mixed_rounds": 2,
                             "retrieval_k": 2, **kw})


NEIGHBOURS = [[1, 2], [0, 2], [1, 0]]


def test_code_mode_mixes_the_last_rounds_with_the_nearest_neighbours_farther_first():
    """The released script sorts similarities ascending and takes ``[-3:-1]``: the 2nd nearest, then the
    nearest (the sentence itself is the last)."""
    plan = plan_partners(3, NEIGHBOURS, mixner("code"), rounds=5, seed=1)
    assert plan[0] == [None, None, None, 2, 1]
    assert plan[2] == [None, None, None, 0, 1]


def test_off_mode_never_mixes():
    assert plan_partners(3, NEIGHBOURS, mixner("off"), rounds=5, seed=1) == [[None] * 5] * 3


def test_code_mode_with_fewer_rounds_than_mixed_rounds_mixes_every_round_in_the_released_order():
    assert plan_partners(3, NEIGHBOURS, mixner("code"), rounds=1, seed=1) == [[2], [2], [0]]
    assert plan_partners(3, NEIGHBOURS, mixner("code"), rounds=2, seed=1)[0] == [2, 1]
    assert plan_partners(3, NEIGHBOURS, mixner("code"), rounds=3, seed=1)[0] == [None, 2, 1]


def test_templates_are_cut_only_at_the_generators_limit_and_counted(tiny_models):
    from aclm.steps.generator import load_generator
    from aclm.steps.generation import input_limit, truncated_jobs

    model, tokenizer = load_generator(str(tiny_models / "mbart-large-50"), "en")
    limit = input_limit(model, tokenizer)
    assert limit == model.config.max_position_embeddings
    long_template = " ".join(["<b-per> ann <b-per> sang"] * 400)
    jobs = [Job(0, 0, None, "<b-per> ann <b-per> sang"), Job(1, 0, 0, long_template)]
    assert truncated_jobs(tokenizer, jobs, limit) == [1]
    assert truncated_jobs(tokenizer, jobs[:1], 100) == []


def test_paper_gate_mixes_at_the_gaussian_rate_with_top_k_neighbours():
    n = 2000
    neighbours = [[(i + 1) % n, (i + 2) % n, (i + 3) % n] for i in range(n)]
    plan = plan_partners(n, neighbours, mixner("paper"), rounds=5, seed=3)
    mixed = [(i, p) for i, row in enumerate(plan) for p in row if p is not None]
    expected = 1 - NormalDist(0.5, 0.25).cdf(0.7)                     # P(gamma > beta) = 0.212
    assert abs(len(mixed) / (5 * n) - expected) < 0.02
    assert all(p in neighbours[i][:2] for i, p in mixed)              # only among the top retrieval_k
    assert plan == plan_partners(n, neighbours, mixner("paper"), rounds=5, seed=3)


def test_mixed_job_joins_source_before_partner():
    a = [Piece("paris", "B-LOC", "entity"), Piece("is", "O", "mask")]
    b = [Piece("rome", "B-LOC", "entity")]
    jobs = build_jobs([a, b], [[1], [None]], "<mask>", seed=1)
    assert jobs[0].template == "<b-loc> paris <b-loc> <mask> <b-loc> rome <b-loc>"
    assert jobs[1].template == "<b-loc> rome <b-loc>"


def test_retrieval_matches_brute_force(tiny_models):
    from sentence_transformers import SentenceTransformer

    texts = ["the cat sat", "a dog ran", "the cat sat down", "music in paris", "a dog ran far", "paris music"]
    found = nearest_neighbours(texts, str(tiny_models / "sbert"), k=2, batch_size=4, device=torch.device("cpu"))
    emb = SentenceTransformer(str(tiny_models / "sbert"), device="cpu").encode(texts, convert_to_tensor=True,
                                                                                normalize_embeddings=True)
    sims = emb @ emb.T
    sims.fill_diagonal_(-2)
    assert found == sims.topk(2, dim=1).indices.tolist()


class FakeTokenizer:
    """ids 0-9 decode to words, 100+ are label tokens, 2 is </s>, 6 is <mask>, 7 the unknown piece [UNK]."""

    words = {0: "", 1: "the", 2: "</s>", 3: "band", 4: "copper", 5: "lanterns", 6: "<mask>", 7: "[UNK]"}
    unk_token_id = 7

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.words[i] for i in ids if not (skip_special_tokens and i in (0, 2, 6, 7))).strip()

    def convert_ids_to_tokens(self, i):
        return {100: "<b-grp>", 101: "<i-grp>", 6: "<mask>", 7: "[UNK]"}[i]


def test_an_unknown_piece_kept_in_sight_is_written_unk_and_parsing_rejects_it():
    ids = [2, 1, 100, 7, 4, 100, 2]           # an entity word that lost characters to the unknown piece
    text = decode_keeping_labels(FakeTokenizer(), ids, {100, 7})
    assert text == "the <b-grp> <unk> copper <b-grp>"
    with pytest.raises(MalformedGeneration, match="lost_characters"):
        parse_generation(text, ["GRP"])
    assert decode_keeping_labels(FakeTokenizer(), ids, {100}) == "the <b-grp> copper <b-grp>"   # released: dropped


def test_decoding_keeps_label_tokens_apart_from_words():
    ids = [2, 1, 3, 100, 4, 100, 101, 5, 101, 2]
    assert decode_keeping_labels(FakeTokenizer(), ids, {100, 101}) == \
        "the band <b-grp> copper <b-grp> <i-grp> lanterns <i-grp>"


def test_decoding_keeps_an_unfilled_mask_so_screening_rejects_it():
    assert decode_keeping_labels(FakeTokenizer(), [2, 1, 6, 3, 2], {100}) == "the band"   # not kept: dropped
    text = decode_keeping_labels(FakeTokenizer(), [2, 1, 6, 100, 4, 100, 2], {100, 101, 6})
    assert text == "the <mask> <b-grp> copper <b-grp>"
    rows, counts = screen([Job(0, 0, None, "t")], [text], ["GRP"])
    assert rows[0]["status"] == "malformed_unfilled_mask" and counts["malformed_unfilled_mask"] == 1


def test_screen_counts_malformed_and_duplicates():
    jobs = [Job(0, r, None, "t") for r in range(4)]
    outputs = ["<b-per> ann <b-per> sang", "<b-per> ann <b-per> sang", "<b-per> ann sang", "<b-xyz> a <b-xyz>"]
    rows, counts = screen(jobs, outputs, ["PER"])
    assert [r["status"] for r in rows] == ["kept", "duplicate", "malformed_unpaired_tag", "malformed_unknown_tag"]
    assert rows[0]["tokens"] == ["ann", "sang"] and rows[0]["tags"] == ["B-PER", "O"]
    assert counts == {**zero_counts(), "generated": 4, "kept": 1, "duplicate": 1, "malformed_unpaired_tag": 1,
                      "malformed_unknown_tag": 1}


def post(**kw):
    return OmegaConf.create({"consistency_filter": False, "drop_copies": True, "max_similarity": 1.0,
                             "drop_entity_free": False, **kw})


SRC = TaggedSentence(["ann", "sang", "in", "paris"], ["B-PER", "O", "O", "B-LOC"])


def test_copies_of_the_source_are_dropped():
    same = TaggedSentence(list(SRC.tokens), list(SRC.tags))
    new = TaggedSentence(["bob", "sang", "in", "rome"], ["B-PER", "O", "O", "B-LOC"])
    kept, counts = filter_augmentations([(same, [SRC]), (new, [SRC])], post())
    assert [a.tokens for a, _ in kept] == [new.tokens] and counts["copy_of_source"] == 1


def test_copies_stay_when_drop_copies_is_off():
    same = TaggedSentence(list(SRC.tokens), list(SRC.tags))
    kept, counts = filter_augmentations([(same, [SRC])], post(drop_copies=False, max_similarity=0.5))
    assert [a.tokens for a, _ in kept] == [SRC.tokens] and counts["copy_of_source"] == 0


def test_near_copies_are_dropped_when_configured():
    near = TaggedSentence(["ann", "sang", "in", "rome"], ["B-PER", "O", "O", "B-LOC"])
    assert similarity(near.tokens, SRC.tokens) == pytest.approx(0.75)
    assert filter_augmentations([(near, [SRC])], post())[1]["kept"] == 1
    assert filter_augmentations([(near, [SRC])], post(max_similarity=0.7))[1]["copy_of_source"] == 1


def test_entity_free_and_consistency_filters():
    plain = TaggedSentence(["it", "rained"], ["O", "O"])
    good = TaggedSentence(["bob", "sang"], ["B-PER", "O"])
    bad = TaggedSentence(["rome", "sang"], ["B-PER", "O"])
    candidates = [(plain, [SRC]), (good, [SRC]), (bad, [SRC])]
    assert filter_augmentations(candidates, post(drop_entity_free=True))[1]["entity_free"] == 1
    predict = lambda sents: [["B-PER", "O"] if s.tokens[0] == "bob" else ["B-LOC", "O"] for s in sents]  # noqa: E731
    kept, counts = filter_augmentations(candidates[1:], post(consistency_filter=True), predict)
    assert [a.tokens for a, _ in kept] == [["bob", "sang"]] and counts["inconsistent"] == 1
    with pytest.raises(ValueError, match="gold NER model"):
        filter_augmentations(candidates, post(consistency_filter=True))


def test_label_tokens_start_from_related_words(tiny_models):
    from aclm.steps.generator import add_label_tokens, load_generator
    from aclm.steps.labels import label_words

    assert label_words("b-per", {"PER": "person"}) == "person begin"
    assert label_words("I-CW", {"cw": "creative work"}) == "creative work inside"
    assert label_words("B-GENE", {}) == "gene begin"

    model, tokenizer = load_generator(str(tiny_models / "mbart-large-50"), "en")
    before = len(tokenizer)
    tokens = add_label_tokens(model, tokenizer, ["PER", "CW"], {"PER": "person", "CW": "creative work"})
    assert tokens == ["<b-cw>", "<i-cw>", "<b-per>", "<i-per>"] and len(tokenizer) == before + 4
    assert tokenizer.tokenize("<b-per> ann <b-per>")[0] == "<b-per>"          # never split
    emb = model.get_input_embeddings().weight
    for token, words in (("<b-per>", "person begin"), ("<i-per>", "person inside"), ("<i-cw>", "creative work inside")):
        ids = tokenizer(words, add_special_tokens=False)["input_ids"]
        assert torch.allclose(emb[tokenizer.convert_tokens_to_ids(token)], emb[ids].mean(dim=0))
    b, i = (emb[tokenizer.convert_tokens_to_ids(t)] for t in ("<b-per>", "<i-per>"))
    assert not torch.allclose(b, i)                                            # a type's two tokens start apart
