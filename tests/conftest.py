"""Shared fixtures: the tiny offline models and the real data folder (when present)."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch


from aclm.base.config import load_config
from aclm.base.paths import PROJECT_ROOT

# The tiny models gain nothing from intra-op threads, and on a busy 2-core machine
# competing OpenMP threads slow them down by orders of magnitude.
torch.set_num_threads(1)


@contextmanager
def all_threads():
    """Every core for one larger model: unlike the tiny ones, it gains from intra-op threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


SHARED_DATA = Path(os.environ.get("ACLM_DATA_DIR") or PROJECT_ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def tiny_models() -> Path:
    """Build (or reuse) models/tiny, the folder the tiny profile points at."""
    from tools.tiny_models import DEFAULT_OUT_DIR, build_tiny_models

    build_tiny_models(DEFAULT_OUT_DIR)
    return Path(DEFAULT_OUT_DIR)


@pytest.fixture(scope="session")
def real_vocab() -> Path:
    """Build (or reuse) models/tiny-250k: tiny XLM-R and mBART-50 on the real 250k-piece vocabulary, rebuilt
    from the pinned package that carries it (skips, saying so, where it is not installed)."""
    from tools.real_vocab import DEFAULT_OUT_DIR, MissingVocabulary, build

    try:
        build(DEFAULT_OUT_DIR)
    except MissingVocabulary as err:
        pytest.skip(str(err))
    return Path(DEFAULT_OUT_DIR)


@pytest.fixture(scope="session")
def mini_generator(shared_data) -> Path:
    """Build (or reuse) models/mini/mbart-large-50, the pretrained small mBART-50 the mini profile points at.

    The first build pretrains it on the WikiNEuRal text of the data folder (about 15 minutes on 2 idle cores,
    `make mini-generator`) into the user cache (``$ACLM_CACHE``, else ``~/.cache/aclm``); a later checkout
    or CI run on the machine links to it.
    """
    from tools.pretraining import DEFAULT_OUT_DIR, MODEL_NAME, pretrain_generator, user_cache

    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip(f"the mini generator's pretraining text (wikineural/*/silver.conllu) is not in {shared_data}")
    with all_threads():
        pretrain_generator(DEFAULT_OUT_DIR, shared_data, cache=user_cache())
    return Path(DEFAULT_OUT_DIR) / MODEL_NAME


@pytest.fixture(scope="session")
def warm_generator(shared_data) -> Path:
    """Build (or reuse) models/mini-warm/bert2bert-minilm, the mini_warm profile's generator warm-started from
    MiniLM (`make warm-generator`, about 23 minutes on 2 idle cores the first time on a machine; then the user
    cache holds it, as it holds the mini mBART)."""
    from tools.pretraining import DEFAULT_OUT_DIRS, MODEL_NAMES, pretrain_generator, user_cache

    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip(f"the warm generator's training text (wikineural/en/silver.conllu) is not in {shared_data}")
    with all_threads():
        pretrain_generator(DEFAULT_OUT_DIRS["bert2bert"], shared_data, cache=user_cache(), kind="bert2bert")
    return Path(DEFAULT_OUT_DIRS["bert2bert"]) / MODEL_NAMES["bert2bert"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "multiconer" / "en" / "train_full.conll").exists():
        pytest.skip(f"real data not found at {SHARED_DATA} (set ACLM_DATA_DIR to run the integration tests)")
    return SHARED_DATA


# a fast miniature of the tiny profile for tests: one epoch, two rounds
FAST = ["profile=tiny", "ner.epochs=2", "generator.epochs=1", "generation.rounds=2", "daga.epochs=1",
        "melm.epochs=1"]


@pytest.fixture(scope="session")
def fast(tiny_models):
    """Config factory for quick end-to-end runs: ``fast(run_dir, "method=aclm", ...)``."""
    logging.getLogger("flair").setLevel(logging.WARNING)

    def make(run_dir, *overrides: str):
        return load_config([*FAST, f"run_dir={run_dir}", *overrides])

    return make


def logged_steps(folder) -> dict[str, list[int]]:
    """Each scalar tag of the TensorBoard event files in ``folder``, with the steps it was logged at."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def f1_of_predictions(scores: Path, dataset: str) -> float:
    """The span F1 (seqeval's, in %) of the predictions file a scoring stage wrote for ``dataset``."""
    from seqeval.metrics import f1_score

    gold, predicted = [[]], [[]]
    for line in (scores / "predictions" / f"{dataset.replace('/', '_')}.conll").read_text().splitlines():
        if line:
            _, tag, guess = line.split("\t")
            gold[-1].append(tag)
            predicted[-1].append(guess)
        elif gold[-1]:
            gold.append([])
            predicted.append([])
    return 100 * f1_score([g for g in gold if g], [p for p in predicted if p])
