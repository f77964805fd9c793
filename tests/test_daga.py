import math
from dataclasses import replace

import pytest
import torch


from aclm.base.config import DAGAConfig
from aclm.base.data import TaggedSentence
from aclm.steps.screening import COUNT_KEYS, MalformedGeneration
from baselines import daga
from baselines.daga import (BOS, EOS, PAD, UNK, LSTMLanguageModel, Vocabulary, _training_tensors,
                            dev_perplexity, generate, sample, train_lm)
from baselines.linearize import linearize, parse, tag_vocabulary

TAGS = {"B-PER", "I-PER", "B-LOC", "I-LOC"}


def s(text: str, tags: str) -> TaggedSentence:
    return TaggedSentence(text.split(), tags.split())


@pytest.mark.parametrize("sentence, words", [
    (s("john smith went to paris", "B-PER I-PER O O B-LOC"),
     "B-PER john I-PER smith went to B-LOC paris"),
    (s("john mary and bob", "B-PER B-PER O B-PER"),          # adjacent entities of one type
     "B-PER john B-PER mary and B-PER bob"),
    (s("paris john", "B-LOC B-PER"), "B-LOC paris B-PER john"),
    (s("went home", "O O"), "went home"),
])
def test_linearize_and_parse_round_trip(sentence, words):
    assert linearize(sentence) == words.split()
    assert parse(words.split(), TAGS) == sentence


@pytest.mark.parametrize("words, tags", [
    ("I-PER john went", "B-PER O"),                   # I- opening the sentence
    ("went I-PER john I-PER smith", "O B-PER I-PER"),  # I- after O
    ("B-LOC paris I-PER john", "B-LOC B-PER"),         # I- after another type
])
def test_entity_opened_by_i_becomes_b(words, tags):
    assert parse(words.split(), TAGS).tags == tags.split()


@pytest.mark.parametrize("words, reason", [
    ("", "empty"),
    ("B-PER", "tag_without_word"),
    ("went to B-LOC", "tag_without_word"),
    ("B-PER I-PER smith", "tag_without_word"),
    ("went B-ORG acme", "unknown_tag"),
])
def test_invalid_sequences_name_their_reason(words, reason):
    with pytest.raises(MalformedGeneration) as err:
        parse(words.split(), TAGS)
    assert err.value.reason == reason


def test_tag_vocabulary_has_both_prefixes_of_every_type():
    assert tag_vocabulary([s("paris is nice", "B-LOC O O")]) == {"B-LOC", "I-LOC"}


BASE = [
    s("john smith went to paris", "B-PER I-PER O O B-LOC"),
    s("mary lives in berlin", "B-PER O O B-LOC"),
    s("the film titanic won", "O O B-CW O"),
    s("apple inc hired bob", "B-CORP I-CORP O B-PER"),
    s("rain fell", "O O"),
]
TRAIN = BASE * 2
CFG = DAGAConfig(embedding_dim=16, hidden_size=32, dropout=0.0, lr=0.02, epochs=30, batch_size=4, max_length=20)



DEV = [s("mary smith went to berlin", "B-PER I-PER O O B-LOC"), s("the film lost", "O O O")]


@pytest.fixture(scope="module")
def trained():
    model, vocab, _ = train_lm(TRAIN, BASE, CFG, seed=0, device="cpu")   # dev = the sentences it memorises
    return model, vocab


def test_vocabulary_starts_with_the_special_symbols():
    vocab = Vocabulary.build([["B-PER", "john", "went"], ["went"]])
    assert vocab.itos == [PAD, BOS, EOS, UNK, "B-PER", "john", "went"]
    assert vocab.encode(["went", "nowhere"]) == [6, 3]


def test_teacher_forcing_pairs_are_shifted_by_one_and_padded():
    vocab = Vocabulary.build([linearize(x) for x in BASE])
    inputs, targets = _training_tensors([BASE[4], BASE[2]], vocab, max_length=20)
    rain, fell = vocab.encode(["rain", "fell"])
    assert inputs[0].tolist() == [1, rain, fell, 0, 0, 0]
    assert targets[0].tolist() == [rain, fell, 2, 0, 0, 0]
    assert targets[1].tolist() == vocab.encode(linearize(BASE[2])) + [2]
    cut_inputs, cut_targets = _training_tensors([BASE[2]], vocab, max_length=3)
    assert cut_inputs.shape == cut_targets.shape == (1, 3)


def test_model_outputs_next_word_logits():
    model = LSTMLanguageModel(vocab_size=11, embedding_dim=4, hidden_size=6, dropout=0.5, pad_index=0)
    logits, (h, c) = model(torch.zeros(3, 5, dtype=torch.long))
    assert logits.shape == (3, 5, 11) and h.shape == c.shape == (1, 3, 6)


def test_trained_lm_generates_well_formed_training_like_sentences(trained):
    model, vocab = trained
    known = tag_vocabulary(TRAIN)
    parsed = []
    for words in sample(model, vocab, 200, max_length=20, seed=1):
        try:
            parsed.append(parse(words, known))
        except MalformedGeneration:
            pass
    assert len(parsed) >= 180
    # The LM memorises ten repeated sentences: most samples reproduce one, tags included.
    assert sum(x in BASE for x in parsed) >= 180


def test_sampling_is_batched_and_deterministic(trained):
    model, vocab = trained
    out = sample(model, vocab, 7, max_length=3, seed=4, batch_size=3)
    assert len(out) == 7 and all(len(words) <= 3 for words in out)
    assert max(len(words) for words in out) == 3   # the long sentences are cut at max_length
    assert not {PAD, BOS, EOS, UNK} & {w for words in out for w in words}
    assert sample(model, vocab, 7, max_length=3, seed=4, batch_size=3) == out
    assert sample(model, vocab, 50, max_length=20, seed=5) != sample(model, vocab, 50, max_length=20, seed=6)


def test_dev_perplexity_is_the_exp_mean_loss_over_real_tokens():
    vocab = Vocabulary.build([linearize(x) for x in BASE])
    torch.manual_seed(0)
    model = LSTMLanguageModel(len(vocab), 8, 8, 0.0, vocab.stoi[PAD])
    inputs, targets = _training_tensors([BASE[0], BASE[4]], vocab, max_length=20)   # 9 and 3 targets, padded
    assert int((targets != vocab.stoi[PAD]).sum()) == 12
    logits, _ = model(inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, len(vocab)), targets.reshape(-1),
                                             ignore_index=vocab.stoi[PAD], reduction="sum") / 12
    together = dev_perplexity(model, inputs, targets, vocab.stoi[PAD], 2, torch.device("cpu"))
    assert together == pytest.approx(math.exp(loss.item()), rel=1e-5)
    one_by_one = dev_perplexity(model, inputs, targets, vocab.stoi[PAD], 1, torch.device("cpu"))
    assert one_by_one == pytest.approx(together, rel=1e-5)                  # padding never counts


def test_the_epoch_with_the_lowest_dev_perplexity_is_kept(monkeypatch):
    scripted, states = iter([9.0, 4.0, 6.0, 5.0]), []

    def scripted_perplexity(model, *args):
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        return next(scripted)

    monkeypatch.setattr(daga, "dev_perplexity", scripted_perplexity)
    model, _, best = train_lm(TRAIN, DEV, replace(CFG, epochs=4), seed=0)
    assert best == {"lm_best_epoch": 2, "lm_best_dev_perplexity": 4.0}
    kept = model.state_dict()
    assert all(torch.equal(kept[k], states[1][k]) for k in kept)            # epoch 2's weights ...
    assert not all(torch.equal(kept[k], states[3][k]) for k in kept)        # ... not the last epoch's
    assert not model.training


def test_a_real_run_records_the_kept_models_dev_perplexity():
    model, vocab, best = train_lm(TRAIN, DEV, replace(CFG, epochs=6), seed=0)
    inputs, targets = _training_tensors(DEV, vocab, CFG.max_length)
    assert 1 <= best["lm_best_epoch"] <= 6
    assert dev_perplexity(model, inputs, targets, vocab.stoi[PAD], 4, torch.device("cpu")) == pytest.approx(
        best["lm_best_dev_perplexity"], rel=1e-5)


def test_generate_counts_add_up_and_repeat_for_a_seed():
    kept, counts, lm = generate(TRAIN, BASE, CFG, rounds=3, seed=0, device="cpu")   # dev: what it memorises
    assert counts["generated"] == 3 * len(TRAIN)
    assert set(counts) == set(COUNT_KEYS)
    dropped = counts["copy"] + counts["duplicate"] + sum(v for k, v in counts.items() if k.startswith("malformed_"))
    assert dropped + counts["kept"] == counts["generated"] and counts["kept"] == len(kept)
    assert counts["copy"] > counts["generated"] // 2
    keys = [(tuple(x.tokens), tuple(x.tags)) for x in kept]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {(tuple(x.tokens), tuple(x.tags)) for x in BASE}
    assert set(lm) == {"lm_best_epoch", "lm_best_dev_perplexity"}
    assert generate(TRAIN, BASE, CFG, rounds=3, seed=0, device="cpu") == (kept, counts, lm)


def test_augment_gold_records_the_lms_best_epoch_and_dev_perplexity():
    from dataclasses import asdict
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"daga": asdict(replace(CFG, epochs=3)), "generation": {"rounds": 2}, "seed": 0})
    rows, counts = daga.augment_gold(cfg, SimpleNamespace(train=TRAIN, dev=DEV, device="cpu"))
    assert counts["kept"] == len(rows) and counts["generated"] == 2 * len(TRAIN)
    assert 1 <= counts["lm_best_epoch"] <= 3 and counts["lm_best_dev_perplexity"] > 1


def test_the_lm_logs_each_epoch_to_tensorboard_where_the_stage_logs(tmp_path):
    from aclm.base import tensorboard
    from conftest import logged_steps

    with tensorboard.logging_into(tmp_path, "on"):
        train_lm(TRAIN, DEV, replace(CFG, epochs=3), seed=0)
    assert logged_steps(tmp_path / "daga_lm")["dev/perplexity"] == [1, 2, 3]
    with tensorboard.logging_into(tmp_path / "off", "off"):
        train_lm(TRAIN, DEV, replace(CFG, epochs=1), seed=0)
    assert not (tmp_path / "off").exists()


def test_tensorboard_on_without_the_package_is_an_error_before_training(monkeypatch, tmp_path):
    from aclm.base import tensorboard
    from aclm.base.runtime import RunError

    monkeypatch.setattr(tensorboard, "installed", lambda: False)
    with pytest.raises(RunError, match="tensorboard=off"):
        with tensorboard.logging_into(tmp_path, "on"):
            pass
    with tensorboard.logging_into(tmp_path, "auto"):
        assert tensorboard.folder("daga_lm") is None
