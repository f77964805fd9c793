"""The mini profile's generator knows language (make mini-generator; aclm/builders/pretraining.py).

S4 fine-tunes it, with the mini profile's settings, on templates of the authors'
released en-100 sample (the released rule's random keywords, S3's skeletons);
S5's decoding (top-k 10 sampling in 5 beams, R = 5 rounds) then turns six
hand-written templates it never saw into sentences.  A generation passes when
it parses, keeps every entity with its type, and has a word of its own (one
not in its template): what S6 keeps.

With the default build (held-out token accuracy 0.671) 14 of the 30 pass: 4-5
of 5 for templates whose entities have at most two words, none for the three
with a three-word entity, whose ``<i-x> w <i-x> <i-x> w <i-x>`` the small model
collapses into one pair.  The test asks for a quarter, and for the tiny random
generator, fine-tuned the same way, to pass at most one in twenty: the check
measures the pretraining.  Needs ../shared/data; the first run builds the
generator (about 15 minutes on 2 cores), S4 and S5 take about 80 s each model.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import torch

from conftest import all_threads

from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, read_conll
from aclm.steps.finetuning import finetune, language_code, load_generator
from aclm.steps.generation import build_jobs, decode_jobs
from aclm.steps.keywords import select_random_released
from aclm.steps.templates import MalformedGeneration, label_tokens, linearize, parse_generation, skeleton

TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
ROUNDS = 5                                 # the paper's R
#: at least this share of the mini generator's outputs pass (14 of 30 with the default build), the random one's at most 1/20
MIN_PASSING, MAX_PASSING_RANDOM = 0.25, 0.05


def tagged(text: str) -> TaggedSentence:
    """``[PER jane austen] wrote ...`` -> words and BIO tags."""
    tokens, tags, etype = [], [], None
    for word in text.split():
        if word.startswith("["):
            etype, first = word[1:], True
            continue
        closing = word.endswith("]")
        word = word.rstrip("]")
        tokens.append(word)
        tags.append("O" if etype is None else ("B-" if first else "I-") + etype)
        first = False
        if closing:
            etype = None
    return TaggedSentence(tokens, tags)


# Hand-written templates (none is in the sample): sentence, and the words kept as keywords.
HELD_OUT = [
    ("the novel was written by [PER jane austen] and published in [LOC london] .", {"novel", "written", "published"}),
    ("[CORP nokia] released the [PROD lumia 920] in [LOC finland] last year .", {"released", "year"}),
    ("[GRP the rolling stones] played a concert in [LOC paris] on friday .", {"played", "concert"}),
    ("he starred in the film [CW the dark knight] directed by [PER christopher nolan] .", {"starred", "film"}),
    ("[PER maria lopez] is a professor at the university of [LOC madrid] .", {"professor", "university"}),
    ("the [GRP boston celtics] won the final against the [GRP los angeles lakers] .", {"won", "final"}),
]


def entities(s: TaggedSentence) -> Counter:
    return Counter((tuple(s.tokens[a:b]), etype) for a, b, etype in s.spans())


def finetune_and_generate(model: Path, work: Path, train: list[TaggedSentence], dev: list[TaggedSentence],
                          *overrides: str) -> list[tuple[TaggedSentence, str, str]]:
    """S3-S5 with the mini profile's settings: (template sentence, template, generation) per held-out round."""
    cfg = load_config(["profile=mini", f"generator.model={model}", *overrides])

    def templates(sentences: list[TaggedSentence]):
        keywords = [select_random_released(s.tokens, s.tags, cfg.keywords.p, cfg.keywords.rule, random.Random(i))
                    for i, s in enumerate(sentences)]
        return ([skeleton(s, k) for s, k in zip(sentences, keywords)],
                [" ".join(linearize(s.tokens, s.tags)) for s in sentences])

    out = work / "s4"
    finetune(cfg.generator, templates(train), templates(dev), {"train": ["en"] * len(train), "dev": ["en"] * len(dev)},
             TYPES, out, work / "checkpoints", 1, torch.device("cpu"))

    sentences = [tagged(text) for text, _ in HELD_OUT]
    skeletons = [skeleton(s, [i for i, w in enumerate(s.tokens) if w in keep and s.tags[i] == "O"])
                 for s, (_, keep) in zip(sentences, HELD_OUT)]
    generator, tokenizer = load_generator(str(out), "en")
    jobs = build_jobs(skeletons, [[None] * ROUNDS for _ in skeletons], tokenizer.mask_token, 1)
    outputs = decode_jobs(generator, tokenizer, jobs, cfg.generation, label_tokens(TYPES),
                          [language_code(tokenizer, "en")] * len(jobs), 1, torch.device("cpu"))
    return [(sentences[job.source], job.template, text) for job, text in zip(jobs, outputs)]


def failures(results: list[tuple[TaggedSentence, str, str]]) -> list[str]:
    """Why each generation fails the check (an empty list: every one passes)."""
    found = []
    for sentence, template, text in results:
        try:
            parsed = parse_generation(text, TYPES)
        except MalformedGeneration as err:
            found.append(f"malformed ({err.reason}): {text!r} from {template!r}")
            continue
        lost = entities(sentence) - entities(parsed)
        if lost:
            found.append(f"lost {sorted(lost)}: {text!r} from {template!r}")
        elif not set(parsed.tokens) - set(template.split()):
            found.append(f"no word of its own: {text!r} from {template!r}")
    return found


@pytest.fixture(scope="module")
def gold(shared_data) -> tuple[list[TaggedSentence], list[TaggedSentence]]:
    """The authors' released en-100 sample, and 200 dev sentences (the mini profile's dev size)."""
    return (read_conll(shared_data / "multiconer" / "en" / "train_100.conll"),
            read_conll(shared_data / "multiconer" / "en" / "dev.conll")[:200])


@pytest.fixture(scope="module")
def mini_results(mini_generator, gold, tmp_path_factory):
    with all_threads():
        return finetune_and_generate(mini_generator, tmp_path_factory.mktemp("mini_s4"), *gold)


def passing_share(results: list[tuple[TaggedSentence, str, str]]) -> float:
    return 1 - len(failures(results)) / len(results)


def test_the_fine_tuned_mini_generator_keeps_the_entities_and_writes_words_of_its_own(mini_results):
    assert len(mini_results) == len(HELD_OUT) * ROUNDS
    assert passing_share(mini_results) >= MIN_PASSING, "\n".join(failures(mini_results))


def test_the_tiny_random_generator_fails_the_same_check(tiny_models, gold, tmp_path):
    results = finetune_and_generate(tiny_models / "mbart-large-50", tmp_path, *gold)
    assert passing_share(results) <= MAX_PASSING_RANDOM
