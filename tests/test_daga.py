import pytest
import torch

from aclm.config import DAGAConfig
from aclm.data import TaggedSentence
from baselines.daga import (BOS, EOS, PAD, UNK, LSTMLanguageModel, Vocabulary, _training_tensors,
                            generate, sample, train_lm)
from aclm.screening import COUNT_KEYS, MalformedGeneration
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



@pytest.fixture(scope="module")
def trained():
    return train_lm(TRAIN, CFG, seed=0, device="cpu")


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


def test_generate_counts_add_up_and_repeat_for_a_seed():
    kept, counts = generate(TRAIN, CFG, rounds=3, seed=0, device="cpu")
    assert counts["generated"] == 3 * len(TRAIN)
    assert set(counts) == set(COUNT_KEYS)
    dropped = counts["copy"] + counts["duplicate"] + sum(v for k, v in counts.items() if k.startswith("malformed_"))
    assert dropped + counts["kept"] == counts["generated"] and counts["kept"] == len(kept)
    assert counts["copy"] > counts["generated"] // 2
    keys = [(tuple(x.tokens), tuple(x.tags)) for x in kept]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {(tuple(x.tokens), tuple(x.tags)) for x in BASE}
    assert generate(TRAIN, CFG, rounds=3, seed=0, device="cpu") == (kept, counts)
