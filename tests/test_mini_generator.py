"""The mini profile's generator knows language (make mini-generator; tools/pretraining.py).

S4 fine-tunes it, with the mini profile's settings, on templates of the authors'
released en-100 sample (the released rule's random keywords, S3's skeletons);
S5's decoding (top-k 10 sampling in 5 beams) then turns six hand-written
templates it never saw into sentences, 20 rounds each.  A generation passes
when it parses, keeps every entity with its type, and has a word of its own
(one not in its template): what S6 keeps.  The same fine-tuned model decodes
twice: as the paper does (``generation.constrained=off``) and with the label-token
grammar enforced (``labels``), which leaves only the words to the model.

How many pass depends on the build more than its held-out figures show: builds
with the same spec and seed on other hardware or thread counts (held-out token
accuracy 0.669-0.671) passed 4 to 14 of 30 generations (R = 5) with the paper's
decoding, and one build 0.16-0.29 of 120 (R = 20) over four fine-tuning seeds,
0.32-0.47 under ``labels``.  There the template with a two-word and a one-word
entity (maria lopez, madrid) passed 17-20 of 20 in each fine-tune, and the two
whose three-word entity the small model collapses into one pair passed none.
So the test asks for a tenth with the paper's decoding and a fifth under
``labels``, and for the tiny random generator, fine-tuned the same way, to pass
at most one in twenty with either: the check measures the pretraining.  Needs
../shared/data; the first run builds the generator (about 15 minutes on 2
cores), S4 takes about 100 s a model, S5 about 10 s a decoding.
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
from aclm.steps.generator import finetune, language_code, load_generator
from aclm.steps.generation import build_jobs, decode_jobs
from aclm.steps.keywords import select_random_released
from aclm.steps.labels import label_tokens, linearize, parse_generation
from aclm.steps.screening import MalformedGeneration
from aclm.steps.templates import skeleton

pytestmark = pytest.mark.real_weights


TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
ROUNDS = 20                                # the paper's R is 5: more rounds, a steadier share
#: the least share of the mini generator's outputs that pass, per decoding (measured: 0.13-0.47 and 0.32-0.47)
MIN_PASSING = {"off": 0.10, "labels": 0.20}
MAX_PASSING_RANDOM = 0.05                  # the random generator's most, with either decoding
#: the least share of the warm-started generator's outputs that pass (measured on one build, single thread:
#: 28, 73 and 120 of 120; docs/mini-profile.md)
WARM_MIN_PASSING = {"off": 0.10, "labels": 0.30, "entities": 0.50}


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
                          profile: str = "mini", decodings: tuple[str, ...] = tuple(MIN_PASSING)
                          ) -> dict[str, list[tuple[TaggedSentence, str, str]]]:
    """S3-S5 with a profile's settings: (template sentence, template, generation) per held-out round, for each
    of ``decodings`` (``generation.constrained`` modes)."""
    cfg = load_config([f"profile={profile}", f"generator.model={model}"])

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
    results = {}
    for mode in decodings:
        decoding = load_config([f"profile={profile}", f"generation.constrained={mode}"]).generation
        outputs, _ = decode_jobs(generator, tokenizer, jobs, decoding, label_tokens(TYPES),
                                 [language_code(tokenizer, "en")] * len(jobs), 1, torch.device("cpu"))
        results[mode] = [(sentences[job.source], job.template, text) for job, text in zip(jobs, outputs)]
    return results


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


@pytest.mark.parametrize("decoding", list(MIN_PASSING))
def test_the_fine_tuned_mini_generator_keeps_the_entities_and_writes_words_of_its_own(mini_results, decoding):
    results = mini_results[decoding]
    assert len(results) == len(HELD_OUT) * ROUNDS
    assert passing_share(results) >= MIN_PASSING[decoding], "\n".join(failures(results))


def test_the_tiny_random_generator_fails_the_same_check(tiny_models, gold, tmp_path):
    for decoding, results in finetune_and_generate(tiny_models / "mbart-large-50", tmp_path, *gold).items():
        assert passing_share(results) <= MAX_PASSING_RANDOM, decoding


@pytest.fixture(scope="module")
def warm_results(warm_generator, gold, tmp_path_factory):
    with all_threads():
        return finetune_and_generate(warm_generator, tmp_path_factory.mktemp("warm_s4"), *gold, profile="mini_warm",
                                     decodings=tuple(WARM_MIN_PASSING))


@pytest.mark.warm_generator
@pytest.mark.parametrize("decoding", list(WARM_MIN_PASSING))
def test_the_warm_started_generator_passes_the_same_check(warm_results, decoding):
    """The mini_warm profile's generator (tools/warm_start.py), fine-tuned with that profile's settings."""
    results = warm_results[decoding]
    assert passing_share(results) >= WARM_MIN_PASSING[decoding], "\n".join(failures(results))
