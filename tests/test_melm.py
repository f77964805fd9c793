import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer
from transformers.integrations import TensorBoardCallback

from aclm.base import tensorboard
from aclm.base.augmentation import Gold
from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, entity_types, read_conll
from aclm.base.paths import PROJECT_ROOT
from tools.tiny_models import build_tiny_models
from aclm.steps.labels import label_tokens
from aclm.steps.screening import MalformedGeneration, zero_counts
from melm.augment import augment
from melm.codemix import code_mix, nearest_same_type
from melm.encoding import Seed, encode, load_mlm, melm_words
from melm.sources import load_code_mix_pool
from melm.generation import (Job, entity_mask_share, fill_jobs, mask_positions, plan_jobs, read_all, read_back,
                             screen)
from melm.training import EntityMaskingCollator, build_trainer, mask_once, training_features

XLMR = PROJECT_ROOT / "models" / "tiny" / "xlm-roberta"
SAMPLE = PROJECT_ROOT / "data" / "sample" / "en"
TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]


def s(text: str, tags: str) -> TaggedSentence:
    return TaggedSentence(text.split(), tags.split())


MARTA_TAGS = "B-PER I-PER O O O O B-CW I-CW I-CW"
MARTA = s("marta kowalczyk played the lead in the silent harbor", MARTA_TAGS)
BAND = s("the band copper lanterns formed in bristol", "O O B-GRP I-GRP O O B-LOC")
RAIN = s("rain fell", "O O")



@pytest.fixture(scope="module")
def cfg():
    return load_config(["profile=tiny", "method=melm", "melm.epochs=1"])


@pytest.fixture(scope="module")
def mlm(cfg):
    if not XLMR.is_dir():
        build_tiny_models()
    torch.manual_seed(0)
    return load_mlm(cfg.melm.model, TYPES, cfg.generator.label_token_init)


@pytest.fixture(scope="module")
def sample():
    return read_conll(SAMPLE / "train.conll")[:10], read_conll(SAMPLE / "dev.conll")[:5]


# --------------------------------------------------------------------------- encoding


def test_linearization_wraps_entity_words_and_marks_the_swapped_entity():
    words, origin = melm_words(s("anna went to paris", "B-PER O O B-LOC"), {3: "de"})
    assert words == ["<b-per>", "anna", "<b-per>", "went", "to", "<de>", "<b-loc>", "paris", "<b-loc>"]
    assert origin == [-1, 0, -1, 1, 2, -1, -1, 3, -1]


def test_a_swapped_entity_has_a_language_marker_before_every_word():
    from melm.codemix import Mention, swap

    seed = swap(s("anna went to paris", "B-PER O O B-LOC"), 0, 3, 4, Mention(("bad", "homburg"), "LOC", "de"))
    assert seed.markers == {3: "de", 4: "de"}
    words, origin = melm_words(seed.sentence, seed.markers)
    assert words[5:] == ["<de>", "<b-loc>", "bad", "<b-loc>", "<de>", "<i-loc>", "homburg", "<i-loc>"]
    assert origin[5:] == [-1, -1, 3, -1, -1, -1, 4, -1]


def test_label_tokens_start_from_the_type_word_alone(cfg):
    init = {"PER": "person", "CW": "creative work"}
    model, tokenizer = load_mlm(cfg.melm.model, ["CW", "PER"], init)
    fresh = AutoTokenizer.from_pretrained(XLMR)
    table = AutoModelForMaskedLM.from_pretrained(XLMR).get_input_embeddings().weight
    embeddings = model.get_input_embeddings().weight
    for token, words in [("<b-per>", "person"), ("<i-per>", "person"), ("<b-cw>", "creative work"),
                         ("<i-cw>", "creative work")]:
        expected = table[fresh(words, add_special_tokens=False)["input_ids"]].mean(dim=0)
        assert torch.allclose(embeddings[tokenizer.convert_tokens_to_ids(token)], expected)


def test_every_subtoken_maps_back_to_its_word_and_entity(mlm):
    _, tokenizer = mlm
    enc = encode(MARTA, tokenizer)
    assert enc.complete and len(enc.input_ids) == len(enc.word) == len(enc.entity)
    for i, word in enumerate(MARTA.tokens):
        pieces = [t for t, w in zip(enc.input_ids, enc.word) if w == i]
        assert tokenizer.decode(pieces).strip() == word
    expected_entity = {0: 0, 1: 0, 6: 1, 7: 1, 8: 1}           # marta kowalczyk / the silent harbor
    assert enc.entity == [expected_entity.get(w, -1) for w in enc.word]
    labels = set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES)))
    assert all(w == -1 for t, w in zip(enc.input_ids, enc.word) if t in labels)
    assert sum(t in labels for t in enc.input_ids) == 2 * 5      # a pair around each of the 5 entity words


# --------------------------------------------------------------------------- training masks


@pytest.fixture(scope="module")
def features(mlm):
    _, tokenizer = mlm
    return training_features([encode(x, tokenizer) for x in (MARTA, BAND, RAIN)])


def padded_entity_mask(batch_size: int, width: int, features: list[dict]) -> torch.Tensor:
    entity = torch.zeros(batch_size, width, dtype=torch.bool)
    for row, f in enumerate(features):
        entity[row, :len(f["input_ids"])] = torch.tensor(f["special_tokens_mask"]) == 0
    return entity


def test_training_features_skip_entity_free_sentences_and_protect_non_entity_tokens(mlm, features):
    _, tokenizer = mlm
    assert len(features) == 2                                    # RAIN has nothing to mask
    enc = encode(MARTA, tokenizer)
    assert features[0]["special_tokens_mask"] == [0 if k >= 0 else 1 for k in enc.entity]


def test_collator_masks_only_entity_tokens(mlm, features):
    _, tokenizer = mlm
    collator = EntityMaskingCollator(tokenizer, mlm_probability=0.7, seed=0)
    label_ids = set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES)))
    for _ in range(50):
        batch = collator(features)
        entity = padded_entity_mask(*batch["input_ids"].shape, features)
        masked = batch["labels"] != -100
        assert masked.any()
        assert not (masked & ~entity).any()
        assert (batch["input_ids"][masked] == tokenizer.mask_token_id).all()
        for row, f in enumerate(features):
            ids = torch.tensor(f["input_ids"])
            n = len(ids)
            assert torch.equal(batch["labels"][row, :n][masked[row, :n]], ids[masked[row, :n]])
            assert torch.equal(batch["input_ids"][row, :n][~masked[row, :n]], ids[~masked[row, :n]])
            assert not set(ids[masked[row, :n]].tolist()) & label_ids


def test_masks_are_fresh_at_every_draw_and_reproducible_for_a_seed(mlm, features):
    _, tokenizer = mlm
    draws = [[c(features)["labels"] for _ in range(4)]
             for c in (EntityMaskingCollator(tokenizer, mlm_probability=0.5, seed=3),
                       EntityMaskingCollator(tokenizer, mlm_probability=0.5, seed=3),
                       EntityMaskingCollator(tokenizer, mlm_probability=0.5, seed=4))]
    assert all(torch.equal(a, b) for a, b in zip(draws[0], draws[1]))
    assert not all(torch.equal(draws[0][0], later) for later in draws[0][1:])
    assert not all(torch.equal(a, b) for a, b in zip(draws[0], draws[2]))


@pytest.mark.parametrize("eta", [0.3, 0.7])
def test_share_of_masked_entity_tokens_is_eta(mlm, features, eta):
    _, tokenizer = mlm
    collator = EntityMaskingCollator(tokenizer, mlm_probability=eta, seed=0)
    masked = total = 0
    for _ in range(300):
        batch = collator(features)
        masked += int((batch["labels"] != -100).sum())
        total += int(padded_entity_mask(*batch["input_ids"].shape, features).sum())
    assert abs(masked / total - eta) < 0.03                     # ~6000 Bernoulli draws: sd < 0.007


def test_a_batch_that_drew_no_mask_is_redrawn(mlm):
    _, tokenizer = mlm
    one = [{"input_ids": [0, 5, 6, 2], "attention_mask": [1] * 4, "special_tokens_mask": [1, 1, 0, 1]}]
    collator = EntityMaskingCollator(tokenizer, mlm_probability=0.05, seed=0)
    for _ in range(20):
        assert collator(one)["labels"].tolist() == [[-100, -100, 6, -100]]


def test_dev_items_are_masked_once_and_then_only_padded(mlm, features):
    _, tokenizer = mlm
    dev = mask_once(features, EntityMaskingCollator(tokenizer, mlm_probability=0.5, seed=1))
    assert all(any(label != -100 for label in item["labels"]) for item in dev)
    collator = EntityMaskingCollator(tokenizer, mlm_probability=0.5, seed=0)
    first, second = collator(dev), collator(dev)
    assert all(torch.equal(first[k], second[k]) for k in ("input_ids", "labels"))
    short = min(range(2), key=lambda i: len(dev[i]["input_ids"]))
    assert first["labels"][short, len(dev[short]["input_ids"]):].eq(-100).all()


def test_the_trainer_hands_the_entity_mask_to_the_collator(mlm, cfg, features, tmp_path):
    """Trainer drops unknown columns by default, which would let the collator mask any token."""
    model, tokenizer = mlm
    same = [features[0]] * 8
    with tensorboard.logging_into(tmp_path / "events", "on"):
        trainer = build_trainer(model, tokenizer, same, same[:1], cfg.melm, 0, torch.device("cpu"), tmp_path)
    assert any(isinstance(c, TensorBoardCallback) for c in trainer.callback_handler.callbacks)
    entity = torch.tensor(features[0]["special_tokens_mask"]) == 0
    for batch in trainer.get_train_dataloader():
        masked = batch["labels"] != -100
        assert masked.any() and not (masked & ~entity).any()


# --------------------------------------------------------------------------- generation masks


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 40])
def test_epsilon_stays_in_bounds_and_masks_at_least_one_token(n):
    rng = random.Random(0)
    for _ in range(500):
        eps = entity_mask_share(n, rng)
        assert 0.0 <= eps <= 1.0 and 1 <= round(eps * n) <= n


@pytest.mark.parametrize("n", [10, 40])
def test_epsilon_is_centred_on_a_half_with_sd_one_over_n(n):
    rng = random.Random(0)
    draws = torch.tensor([entity_mask_share(n, rng) for _ in range(4000)])
    assert abs(draws.mean().item() - 0.5) < 0.01
    assert abs(draws.std().item() - 1 / n) < 0.1 / n


def test_generation_masks_only_entity_tokens_and_some_of_every_entity():
    entity = [-1, 0, 0, 0, -1, 1, -1] + [2] * 10 + [-1]
    for seed in range(200):
        chosen = mask_positions(entity, random.Random(seed))
        assert chosen == sorted(set(chosen))
        assert all(entity[p] >= 0 for p in chosen)
        per_entity = [sum(entity[p] == k for p in chosen) for k in range(3)]
        assert 1 <= per_entity[0] <= 3 and per_entity[1] == 1 and 1 <= per_entity[2] <= 10


# --------------------------------------------------------------------------- filling and reading back


class FavoursSpecials(torch.nn.Module):
    """A stand-in LM whose every prediction ranks the special and label tokens first, then ids in order."""

    def __init__(self, vocab_size: int, favoured: list[int]) -> None:
        super().__init__()
        self.scores = -torch.arange(vocab_size, dtype=torch.float)
        self.scores[favoured] = 1000.0

    def base_model(self, input_ids, attention_mask):
        return (torch.zeros(*input_ids.shape, 1),)

    def lm_head(self, hidden):
        return self.scores.expand(len(hidden), -1)


def test_filling_draws_from_the_top_k_and_never_a_special_or_label_token(mlm):
    _, tokenizer = mlm
    specials = tokenizer.all_special_ids
    assert set(tokenizer.convert_tokens_to_ids(label_tokens(TYPES))) <= set(specials)
    allowed = [i for i in range(len(tokenizer)) if i not in specials][:5]
    encoded = [encode(x, tokenizer) for x in (MARTA, BAND)]
    jobs = plan_jobs(encoded, rounds=20, seed=0)
    filled = fill_jobs(FavoursSpecials(len(tokenizer), specials), tokenizer, encoded, jobs, top_k=5, batch_size=7,
                       seed=0, device=torch.device("cpu"))
    drawn = []
    for job, ids in zip(jobs, filled):
        source = encoded[job.seed_index].input_ids
        assert len(ids) == len(source)
        assert all(ids[p] == source[p] for p in range(len(ids)) if p not in job.masked)
        drawn += [ids[p] for p in job.masked]
    assert set(drawn) == set(allowed)                            # all five, and nothing else


def generate(mlm, sentences: list[TaggedSentence], seed: int) -> tuple[list[dict], dict]:
    model, tokenizer = mlm
    seeds = [Seed(x, i) for i, x in enumerate(sentences)]
    encoded = [encode(x.sentence, tokenizer) for x in seeds]
    jobs = plan_jobs(encoded, rounds=3, seed=seed)
    filled = fill_jobs(model, tokenizer, encoded, jobs, top_k=5, batch_size=8, seed=seed, device=torch.device("cpu"))
    return screen(seeds, sentences, jobs, read_all(seeds, encoded, jobs, filled, tokenizer, TYPES))


def test_generations_keep_the_source_label_sequence_and_change_only_entity_words(mlm, sample):
    train, _ = sample
    rows, counts = generate(mlm, train, seed=0)
    assert rows and counts["kept"] == len(rows)
    changed = 0
    for row in rows:
        source = train[row["sources"][0]]
        assert row["tags"] == source.tags
        assert len(row["tokens"]) == len(source.tokens)
        assert all(new == old for new, old, tag in zip(row["tokens"], source.tokens, source.tags) if tag == "O")
        changed += row["tokens"] != source.tokens
    assert changed == len(rows)
    malformed = sum(v for k, v in counts.items() if k.startswith("malformed_"))
    assert counts["generated"] == counts["kept"] + counts["copy"] + counts["duplicate"] + malformed
    assert counts["generated"] == 3 * sum(bool(x.spans()) for x in train)


def test_same_seed_same_augmentations(mlm, sample):
    train, _ = sample
    assert generate(mlm, train, seed=5) == generate(mlm, train, seed=5)
    assert generate(mlm, train, seed=5)[0] != generate(mlm, train, seed=6)[0]


def test_a_word_is_rebuilt_from_its_own_subtokens_whatever_their_boundaries(mlm):
    _, tokenizer = mlm
    sentence = s("anna went to bristol", "B-PER O O B-LOC")
    enc = encode(sentence, tokenizer)
    positions = [p for p, w in enumerate(enc.word) if w == 3]
    word_start = tokenizer.convert_tokens_to_ids("▁in")
    ids = [word_start if p in positions else i for p, i in enumerate(enc.input_ids)]
    out = read_back(Seed(sentence, 0), enc, ids, positions, tokenizer, TYPES)
    assert out.tokens == ["anna", "went", "to", "in" * len(positions)]
    assert out.tags == sentence.tags


def test_a_word_filled_with_nothing_is_malformed(mlm):
    _, tokenizer = mlm
    sentence = s("anna went to bristol", "B-PER O O B-LOC")
    enc = encode(sentence, tokenizer)
    positions = [p for p, w in enumerate(enc.word) if w == 3]
    bare = tokenizer.convert_tokens_to_ids("▁")
    ids = [bare if p in positions else i for p, i in enumerate(enc.input_ids)]
    with pytest.raises(MalformedGeneration) as err:
        read_back(Seed(sentence, 0), enc, ids, positions, tokenizer, TYPES)
    assert err.value.reason == "empty"


def test_screening_drops_and_counts_copies_repeats_and_malformed_generations():
    mixed = Seed(s("hans kowalczyk played the lead in the silent harbor", MARTA_TAGS), 0, {0: "de"})
    new = s("maria kowalczyk played the lead in the quiet harbor", MARTA_TAGS)
    other = s("hans kowal played the lead in the silent port", MARTA_TAGS)
    seeds = [Seed(MARTA, 0), mixed]
    jobs = [Job(0, 0, []), Job(0, 1, []), Job(0, 2, []), Job(1, 0, []), Job(1, 1, []), Job(1, 2, [])]
    generated = [new, new, MARTA, mixed.sentence, other, MalformedGeneration("empty")]
    rows, counts = screen(seeds, [MARTA], jobs, generated)
    assert [(r["tokens"], r["round"], r["code_mixed"], r["sources"]) for r in rows] == [
        (new.tokens, 0, False, [0]), (other.tokens, 1, True, [0])]
    assert counts == {**zero_counts(), "generated": 6, "kept": 2, "duplicate": 1, "copy": 2, "malformed_empty": 1}


# --------------------------------------------------------------------------- code-mixing


def test_nearest_candidate_is_of_the_same_type():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    candidates = torch.tensor([[1.0, 0.05], [0.6, 0.8], [0.8, 0.6], [0.1, 1.0]])
    types = ["PER", "LOC", "LOC", "PER"]
    # LOC [1, 0]: PER c0 is nearer, but of LOC c2 (cos 0.8) beats c1 (0.6); PER [0, 1] -> c3; no ORG at all
    assert nearest_same_type(queries, ["LOC", "PER", "ORG"], candidates, types).tolist() == [2, 3, -1]
    forbidden = torch.zeros(3, 4, dtype=torch.bool)
    forbidden[0, 2] = True
    assert nearest_same_type(queries, ["LOC", "PER", "ORG"], candidates, types, forbidden).tolist() == [1, 3, -1]


VECTORS = {"anna": [1, 0, 0], "bob": [0, 1, 0], "paris": [0, 0, 1],
           "hans": [0.9, 0.1, 0], "juan": [0.1, 0.9, 0], "pablo": [0, 0, 1],           # PER; pablo looks like paris
           "berlin": [0, 0.6, 0.8], "madrid": [0, 0.3, 1], "bad homburg": [0.05, 0, 1]}  # LOC
POOL = {"de": [s("hans wohnt in berlin", "B-PER O O B-LOC"), s("nach bad homburg", "O B-LOC I-LOC")],
        "es": [s("juan y pablo viven en madrid", "B-PER O B-PER O O B-LOC")],
        "fr": [s("paris est belle", "B-LOC O O")]}                                 # same text: never a swap
# the nearest same-type mention of each entity (anna, bob, paris) within each language; fr has none
# (its only mention, paris, is spelled like the entity it would replace)
NEAREST = {"de": {0: "hans", 2: "hans", 4: "bad homburg"}, "es": {0: "juan", 2: "juan", 4: "madrid"}}


def fake_embed(texts: list[str]) -> torch.Tensor:
    return torch.tensor([VECTORS[t] for t in texts], dtype=torch.float)


def test_code_mixing_draws_the_language_first_then_the_nearest_same_type_entity_in_it():
    train = [s("anna met bob in paris", "B-PER O B-PER O B-LOC"), RAIN]
    languages, swapped = [], set()
    for seed in range(40):
        [mixed] = code_mix(train, POOL, fake_embed, seed)
        assert mixed.source == 0 and mixed.code_mixed
        start, [language] = min(mixed.markers), set(mixed.markers.values())
        words = NEAREST[language][start]                          # each original entity is one word
        assert sorted(mixed.markers) == list(range(start, start + len(words.split())))   # a marker a word
        assert mixed.sentence.tokens == train[0].tokens[:start] + words.split() + train[0].tokens[start + 1:]
        assert [t for *_, t in mixed.sentence.spans()] == [t for *_, t in train[0].spans()]
        languages.append(language)
        swapped.add(start)
    assert swapped == {0, 2, 4}
    # uniform over the languages that have a match: 40 draws, P(a count outside 10..30) < 0.003
    assert set(languages) == {"de", "es"} and 10 <= languages.count("de") <= 30


def test_the_code_mix_pool_refuses_the_target_language(cfg):
    assert {k: len(v) for k, v in load_code_mix_pool(["sample/de"], cfg.data_dir, "en").items()} == {"de": 20}
    with pytest.raises(ValueError):
        load_code_mix_pool(["sample/en"], cfg.data_dir, "en")


# --------------------------------------------------------------------------- end to end


def gold(sample, work_dir: Path) -> Gold:
    train, dev = sample
    return Gold(train, dev, sorted(entity_types(train)), "en", ["en"] * len(train), ["en"] * len(dev),
                torch.device("cpu"), work_dir)


def test_augment_returns_contract_rows(cfg, sample, tmp_path):
    rows, counts = augment(cfg, gold(sample, tmp_path))
    train, _ = sample
    assert rows and len(rows) == counts["kept"]
    for row in rows:
        assert set(row) == {"status", "tokens", "tags", "sources", "round", "code_mixed"}
        assert row["status"] == "kept" and not row["code_mixed"] and 0 <= row["round"] < cfg.melm.rounds
        [source] = row["sources"]
        assert row["tags"] == train[source].tags and row["tokens"] != train[source].tokens
    assert counts["generated"] == cfg.melm.rounds * sum(bool(x.spans()) for x in train)
    assert counts["code_mixed"] == 0 and counts["best_epoch"] == 1
    assert not (tmp_path / "melm-checkpoints").exists()
    assert augment(cfg, gold(sample, tmp_path / "again"))[0] == rows


def test_augment_with_code_mixing_keeps_types_and_drops_markers(sample, tmp_path):
    cfg = load_config(["profile=tiny", "method=melm", "melm.epochs=1", "melm.code_mix=true",
                       "melm.code_mix_languages=[sample/de]"])
    train, _ = sample
    rows, counts = augment(cfg, gold(sample, tmp_path))
    mixed = [r for r in rows if r["code_mixed"]]
    assert counts["code_mixed"] > 0 and mixed
    for row in mixed:
        source = train[row["sources"][0]]
        spans = TaggedSentence(row["tokens"], row["tags"]).spans()
        assert [t for *_, t in spans] == [t for *_, t in source.spans()]
        assert not any(w.startswith("<") and w.endswith(">") for w in row["tokens"])


def test_multilingual_code_mixing_borrows_from_the_other_languages(tiny_models, tmp_path):
    from melm.augment import code_mixed_seeds

    en = [s("ann lives in paris", "B-PER O O B-LOC"), s("bob visited rome", "B-PER O B-LOC")]
    de = [s("eva wohnt in berlin", "B-PER O O B-LOC")]
    cfg = load_config(["profile=tiny", "method=melm", "melm.code_mix=true"])
    gold = Gold(en + de, [], ["LOC", "PER"], "multi", ["en", "en", "de"], [], torch.device("cpu"), tmp_path)
    seeds, languages = code_mixed_seeds(cfg, gold)
    assert languages == ["de", "en"]
    for seed in seeds:
        source_lang = gold.languages[seed.source]
        assert set(seed.markers.values()) and source_lang not in seed.markers.values()
        types = [t for *_, t in seed.sentence.spans()]
        assert types == [t for *_, t in gold.train[seed.source].spans()]     # entity types kept
    assert {gold.languages[seed.source] for seed in seeds} == {"en", "de"}


@pytest.mark.parametrize("family", ["xlm-roberta", "bert"])
def test_the_head_is_found_in_xlm_r_and_bert_masked_lms(family):
    from transformers import BertConfig, BertForMaskedLM, XLMRobertaConfig, XLMRobertaForMaskedLM

    from melm.generation import fill, lm_head

    config_class, model_class = {"xlm-roberta": (XLMRobertaConfig, XLMRobertaForMaskedLM),
                                 "bert": (BertConfig, BertForMaskedLM)}[family]
    torch.manual_seed(0)
    model = model_class(config_class(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32)).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    masked = torch.tensor([[False, False, True, False, False]])
    hidden = model.base_model(input_ids=ids.masked_fill(masked, 4))[0]
    assert torch.allclose(lm_head(model)(hidden), model(input_ids=ids.masked_fill(masked, 4)).logits)
    out = fill(model, ids, torch.ones_like(ids), masked, 4, torch.tensor([0, 2, 4]), 3,
               torch.Generator().manual_seed(0))
    assert out[0, [0, 1, 3, 4]].tolist() == [0, 5, 7, 2] and out[0, 2].item() not in (0, 2, 4)
