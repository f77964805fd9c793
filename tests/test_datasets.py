"""The dataset registry: local files for every entry, the hub as a fallback."""

from __future__ import annotations

import sys
import types

import pytest

from aclm.datasets import get_spec, load_split, registry


def test_every_registered_file_reads_cleanly(shared_data):
    for name, spec in registry().items():
        if spec.union:
            continue
        for split in ("train", "dev", "test"):
            sentences = load_split(name, split, shared_data)
            if getattr(spec, split) is not None:
                assert sentences, (name, split)
                assert all(len(s.tokens) == len(s.tags) for s in sentences)


def test_released_samples_are_registered(shared_data):
    sample = load_split("multiconer/hi", 200, shared_data)
    assert 180 <= len(sample) <= 220


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(KeyError, match="multiconer/en"):
        get_spec("multiconer/xx")


def test_missing_file_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_split("tdmsci", "train", tmp_path)


def test_hub_fallback_maps_tag_ids_to_names(tmp_path, monkeypatch):
    class Split(list):
        features = {"ner_tags": types.SimpleNamespace(feature=types.SimpleNamespace(names=["O", "B-PER", "I-PER"]))}

    calls = []

    def load_dataset(path, name, split):
        calls.append((path, name, split))
        return Split([{"tokens": ["ann", "lee", "sang"], "ner_tags": [2, 2, 0]}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    sentences = load_split("conll2002/es", "dev", tmp_path)          # no local file: falls back to the hub
    assert calls == [("eriktks/conll2002", "es", "validation")]
    assert sentences[0].tags == ["B-PER", "I-PER", "O"]             # normalised like local files
