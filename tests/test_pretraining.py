"""The mini generator's pretraining (tools/pretraining.py): mBART's noise, the batches, determinism, resuming."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import MBart50TokenizerFast

from test_code_identity import checkout_copy, edit
from tools import pretraining as pt
from tools.tiny_models import SPECS, build_mbart50


def test_text_infilling_masks_35_percent_of_the_words_in_spans_one_mask_each():
    words = [f"w{i}" for i in range(20)]
    masked_words = spans = 0
    for seed in range(300):
        out = pt.mask_spans(words, np.random.default_rng(seed), "<mask>", 0.35, 3.5)
        kept = [w for w in out if w != "<mask>"]
        assert kept == [w for w in words if w in kept]                   # the kept words, in order
        assert all(not (a == b == "<mask>") for a, b in zip(out, out[1:]))   # one mask per span, never two in a row
        masked_words += len(words) - len(kept)
        spans += out.count("<mask>")
    assert masked_words == 300 * 7                                       # round(0.35 * 20) every time
    assert 1.5 < masked_words / spans < 3.5                              # Poisson(3.5) spans, some of length 0
    assert pt.mask_spans(["one"], np.random.default_rng(0)) == ["one"]   # nothing to mask in one word


def test_a_span_of_length_zero_inserts_a_mask_between_neighbours():
    words = list("abcdefghijklmnopqrst")
    insertions = 0
    for seed in range(100):
        out = pt.mask_spans(words, np.random.default_rng(seed))
        for before, mask, after in zip(out, out[1:], out[2:]):
            insertions += mask == "<mask>" and "<mask>" not in (before, after) \
                and words.index(after) == words.index(before) + 1
    assert insertions > 0                                  # Poisson(3.5) gives 0 about 3% of the time


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> MBart50TokenizerFast:
    folder = tmp_path_factory.mktemp("mbart")
    build_mbart50(folder, ["the quick brown fox jumps over the lazy dog", "der schnelle braune fuchs"] * 20, 0,
                  SPECS["mbart-large-50"])
    return MBart50TokenizerFast.from_pretrained(folder)


def test_the_collator_writes_the_language_code_on_source_and_target(tokenizer):
    collator = pt.DenoisingCollator(tokenizer, seed=3)
    features = [{"index": 0, "code": "en_XX", "words": "the quick brown fox jumps over the lazy dog".split()},
                {"index": 1, "code": "de_DE", "words": "der schnelle braune fuchs".split()}]
    batch = collator(features)
    code = tokenizer.convert_tokens_to_ids
    for row, features_row in enumerate(features):
        labels = [i for i in batch["labels"][row].tolist() if i != -100]
        source = batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist()
        assert labels[0] == source[0] == code(features_row["code"])
        assert labels[-1] == source[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(labels, skip_special_tokens=True) == " ".join(features_row["words"])
    assert tokenizer.mask_token_id in batch["input_ids"][0].tolist()
    again = pt.DenoisingCollator(tokenizer, seed=3)(features[::-1])      # a sentence's masks: its own, any batch
    assert torch.equal(again["input_ids"][1][again["attention_mask"][1].bool()],
                       batch["input_ids"][0][batch["attention_mask"][0].bool()])


def test_length_grouped_batches_are_seeded_per_epoch_and_similar_in_length():
    lengths = [int(n) for n in np.random.default_rng(0).integers(3, 60, size=1000)]
    sampler = pt.LengthGroupedSampler(lengths, batch_size=32, seed=1, window=10)
    first = list(sampler)
    assert sorted(first) == list(range(1000)) and first == list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    batches = [first[k:k + 32] for k in range(0, 1000, 32)]
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches[:-1]])
    assert spread < 10                                                  # random batches would spread over ~50


def micro() -> dict:
    """A miniature build on the English text: a few steps of a tiny model (seconds)."""
    return {"languages": ["en"], "vocab_size": 400, "heldout_share": 0.005,
            "config": {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
                       "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32},
            "train": {"steps": 6, "batch_size": 8, "warmup_steps": 1}}


@pytest.mark.slow
def test_a_build_is_deterministic_skipped_when_current_and_resumes_where_it_was_killed(shared_data, tmp_path,
                                                                                        monkeypatch, caplog):
    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip("no WikiNEuRal text in the data folder")
    whole, rebuilt = pt.pretrain_generator(tmp_path / "a", shared_data, spec=micro())
    assert rebuilt and whole["steps"] == 6 and whole["resumed_from_step"] == 0
    assert whole["text"]["sentences"]["en"]["in_benchmark"] > 0        # MultiCoNER sentences are left out
    assert 0 < whole["heldout"]["all"]["token_accuracy"] < 1
    assert pt.pretrain_generator(tmp_path / "a", shared_data, spec=micro()) == (whole, False)

    class Killed(Exception):
        pass

    save_rng_state = pt.PretrainingTrainer._save_rng_state

    def killed_while_saving_checkpoint_4(self, output_dir):
        if output_dir.endswith("checkpoint-4"):    # its weights are written, its trainer_state.json is not
            raise Killed()
        save_rng_state(self, output_dir)

    with monkeypatch.context() as m:  # a checkpoint at every step here: when they come decides no weight
        m.setattr(pt.PretrainingTrainer, "_save_rng_state", killed_while_saving_checkpoint_4)
        with pytest.raises(Killed):
            pt.pretrain_generator(tmp_path / "b", shared_data, spec=micro(), checkpoint_seconds=0)
    assert not (tmp_path / "b" / pt.MODEL_NAME).exists()               # nothing half-written in place
    checkpoints = tmp_path / "b" / pt.WORK_NAME / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["checkpoint-3", "checkpoint-4"]
    with caplog.at_level("INFO", logger="tools.pretraining"):
        resumed, _ = pt.pretrain_generator(tmp_path / "b", shared_data, spec=micro(), checkpoint_seconds=0)
    assert resumed["resumed_from_step"] == 3 and resumed["steps"] == 6
    assert "removing checkpoint-4: saving it was interrupted" in caplog.text
    assert "share a tensor stored once and were restored with it" in caplog.text
    assert not (tmp_path / "b" / pt.WORK_NAME).exists()
    a = (tmp_path / "a" / pt.MODEL_NAME / "model.safetensors").read_bytes()
    assert (tmp_path / "b" / pt.MODEL_NAME / "model.safetensors").read_bytes() == a
    assert resumed["heldout"] == whole["heldout"] and resumed["fingerprint"] == whole["fingerprint"]


@pytest.mark.slow
def test_a_build_in_the_user_cache_is_linked_by_the_next_checkout_not_rebuilt(shared_data, tmp_path):
    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip("no WikiNEuRal text in the data folder")
    cache, first_clone, second_clone = tmp_path / "cache", tmp_path / "a" / "mini", tmp_path / "b" / "mini"
    built, rebuilt = pt.pretrain_generator(first_clone, shared_data, spec=micro(), cache=cache)
    assert rebuilt and first_clone.is_symlink() and first_clone.resolve().parent == (cache / "mini-generator").resolve()
    again, rebuilt = pt.pretrain_generator(second_clone, shared_data, spec=micro(), cache=cache)
    assert not rebuilt and again == built and second_clone.resolve() == first_clone.resolve()
    assert (second_clone / pt.MODEL_NAME / "config.json").is_file()
    own, _ = pt.pretrain_generator(tmp_path / "c" / "mini", shared_data, spec=micro(), seed=1)   # before the cache
    adopted, rebuilt = pt.pretrain_generator(tmp_path / "c" / "mini", shared_data, spec=micro(), seed=1, cache=cache)
    assert not rebuilt and adopted == own and (tmp_path / "c" / "mini").is_symlink()


@pytest.mark.slow
def test_a_build_names_its_code_and_rebuilds_when_the_text_as_read_changes(shared_data, tmp_path, monkeypatch):
    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip("no WikiNEuRal text in the data folder")
    built, _ = pt.pretrain_generator(tmp_path, shared_data, spec=micro())
    assert set(built["code"]) == {"tools.pretraining", "tools.tiny_models", "aclm.steps.generator:set_language"}
    assert set(pt.build_code("bert2bert")) == {"tools.pretraining", "tools.warm_start",
                                               "aclm.steps.generator:set_language"}
    from aclm.base import datasets

    read = datasets.load_split

    def a_reader_that_drops_the_last_sentence(name, split, data_dir=None):
        sentences = read(name, split, data_dir)
        return sentences[:-1] if name.startswith("wikineural") else sentences

    monkeypatch.setattr(datasets, "load_split", a_reader_that_drops_the_last_sentence)
    again, rebuilt = pt.pretrain_generator(tmp_path, shared_data, spec=micro())    # same files, other text
    assert rebuilt and again["fingerprint"] != built["fingerprint"]
    assert again["text"]["sentences"]["en"]["read"] == built["text"]["sentences"]["en"]["read"] - 1


@pytest.mark.slow
def test_an_edit_of_the_build_code_rebuilds_and_a_comment_does_not(shared_data, tmp_path):
    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip("no WikiNEuRal text in the data folder")
    code = checkout_copy(tmp_path / "checkout")
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "ACLM_DATA_DIR": str(shared_data)}
    script = ("import json\nfrom tools import pretraining as pt\n"
              f"manifest, rebuilt = pt.pretrain_generator({str(tmp_path / 'mini')!r}, spec={micro()!r})\n"
              "print(json.dumps({'rebuilt': rebuilt, 'code': manifest['code'], 'module': pt.__file__}))\n")

    def build() -> dict:
        done = subprocess.run([sys.executable, "-c", script], cwd=code, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1])

    first = build()
    assert first["rebuilt"] and first["module"] == str(code / "tools" / "pretraining.py")
    edit(code / "tools/pretraining.py", "\ndef mask_spans(", "\n# a comment\ndef mask_spans(")
    edit(code / "tools/pretraining.py", '"""mBART\'s text infilling', '"""Edited: mBART\'s text infilling')
    assert build() == {**first, "rebuilt": False}
    edit(code / "tools/pretraining.py", 'f"{seed}:heldout:{lang}"', 'f"{seed}:held-out:{lang}"')   # other held-out
    second = build()
    assert second["rebuilt"] and second["code"]["tools.pretraining"] != first["code"]["tools.pretraining"]
    assert second["code"]["tools.tiny_models"] == first["code"]["tools.tiny_models"]


def test_a_checkpoint_cut_short_is_never_resumed_from(tmp_path):
    for step, complete in ((100, True), (200, True), (300, False)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        if complete:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    assert pt.last_checkpoint(tmp_path) == tmp_path / "checkpoint-200"
    assert not (tmp_path / "checkpoint-300").exists()
    assert pt.last_checkpoint(tmp_path / "none") is None


def test_a_resumed_checkpoint_may_lack_only_the_tied_embeddings(tokenizer):
    model = pt.build_model(tokenizer, pt.merged_spec({"config": {"d_model": 16, "encoder_layers": 1,
                                                                  "decoder_layers": 1, "encoder_ffn_dim": 16,
                                                                  "decoder_ffn_dim": 16}}), 0)
    tied = {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    assert pt.restored_with_a_twin(model, sorted(tied)) == tied
    assert pt.restored_with_a_twin(model, [*tied, "model.shared.weight"]) == set()   # nothing left to restore from
    trainer = SimpleNamespace(model=model)
    check = pt.PretrainingTrainer._issue_warnings_after_load
    check(trainer, SimpleNamespace(missing_keys=sorted(tied), unexpected_keys=[]))
    with pytest.raises(RuntimeError, match="missing \\['model.encoder.layernorm_embedding.weight'\\]"):
        check(trainer, SimpleNamespace(missing_keys=[*tied, "model.encoder.layernorm_embedding.weight"],
                                       unexpected_keys=[]))


def test_the_progress_line_counts_steps_and_says_how_long_is_left():
    assert pt.step_summary(300, 1500, 3.13604, 1.07e-3, 52.0, 100) == (
        "step 300/1500 (20%): loss 3.1360, lr 1.07e-03, 0.52 s/step, 10m24s left")


def test_checkpoints_come_by_the_clock_and_never_at_the_last_step():
    def asks(seconds: float, step: int) -> bool:
        clock, state, control = pt.CheckpointClock(seconds), SimpleNamespace(global_step=step, max_steps=6), \
            SimpleNamespace(should_save=False)
        clock.on_train_begin(None, state, control)
        clock.on_step_end(None, state, control)
        return control.should_save

    assert asks(0, 5) and not asks(0, 6) and not asks(60, 5)


@pytest.mark.slow
def test_the_warm_started_build_is_deterministic_and_resumes_to_the_same_weights(shared_data, tmp_path, monkeypatch):
    """The BERT2BERT kind (tools/warm_start.py) under the same guarantees: killed mid-build, it resumes from its
    last checkpoint to the weights of a build never stopped."""
    if not (shared_data / "wikineural" / "en" / "silver.conllu").exists():
        pytest.skip("no WikiNEuRal text in the data folder")
    micro_warm = {"heldout_share": 0.002, "train": {"steps": 4, "batch_size": 4, "warmup_steps": 1}}
    whole, _ = pt.pretrain_generator(tmp_path / "a", shared_data, spec=micro_warm, kind="bert2bert")
    assert whole["model"]["kind"] == "bert2bert" and whole["base"] and whole["steps"] == 4

    class Killed(Exception):
        pass

    save_rng_state = pt.PretrainingTrainer._save_rng_state

    def killed_while_saving_checkpoint_3(self, output_dir):
        if output_dir.endswith("checkpoint-3"):
            raise Killed()
        save_rng_state(self, output_dir)

    with monkeypatch.context() as m:
        m.setattr(pt.PretrainingTrainer, "_save_rng_state", killed_while_saving_checkpoint_3)
        with pytest.raises(Killed):
            pt.pretrain_generator(tmp_path / "b", shared_data, spec=micro_warm, checkpoint_seconds=0, kind="bert2bert")
    resumed, _ = pt.pretrain_generator(tmp_path / "b", shared_data, spec=micro_warm, checkpoint_seconds=0,
                                       kind="bert2bert")
    assert resumed["resumed_from_step"] == 2 and resumed["fingerprint"] == whole["fingerprint"]
    name = pt.MODEL_NAMES["bert2bert"]
    assert (tmp_path / "b" / name / "model.safetensors").read_bytes() == (tmp_path / "a" / name /
                                                                          "model.safetensors").read_bytes()
    assert resumed["heldout"] == whole["heldout"]


def test_the_thread_count_is_part_of_the_fingerprint():
    """Two threads split the sums otherwise than one, so a build made with either is never the other's."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = pt.fingerprint({"en": [["a"]]}, [], pt.SPEC, 1)
        torch.set_num_threads(2)
        two = pt.fingerprint({"en": [["a"]]}, [], pt.SPEC, 1)
    finally:
        torch.set_num_threads(threads)
    assert one != two
