"""GLiNER as a method (aclm/steps/spans.py, aclm/stages/spans.py): its spans as BIO tags over the project's
words, its training examples, the epoch kept on dev, and both methods end to end on a tiny GLiNER."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from aclm.base.config import load_config
from aclm.base.data import TaggedSentence
from aclm.run.chain import chain, run_to_result
from aclm.stages import layout
from aclm.steps.spans import BestOnDev, spans_to_bio, training_example, type_names
from conftest import f1_of_predictions

NAMES = {"PER": "person", "LOC": "location"}
WORDS = ["Mr.", "John", "Smith", "lives", "in", "U.S.", "Virgin", "Islands", "."]


def test_a_types_name_is_the_configured_one_else_lower_cased():
    assert type_names(["PER", "CORP"], {"PER": "person"}) == {"PER": "person", "CORP": "corp"}


def test_character_spans_become_bio_tags_over_the_sentences_own_words():
    text = " ".join(WORDS)
    john = {"start": text.index("John"), "end": text.index("Smith") + 5, "label": "person"}
    islands = {"start": text.index("U.S."), "end": text.index("Islands") + 7, "label": "location"}
    inside = {"start": text.index("U.S.") + 2, "end": text.index("U.S.") + 3, "label": "person"}   # "S", inside U.S.
    unknown = {"start": 0, "end": 3, "label": "not a type of ours"}
    assert spans_to_bio(WORDS, [islands, john, inside, unknown], NAMES) == [
        "O", "B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "I-LOC", "O"]


def test_a_gold_entity_is_trained_on_as_the_span_of_glins_own_tokens_of_its_words():
    from gliner.data_processing.tokenizer import WhitespaceTokenSplitter

    splitter = SimpleNamespace(data_processor=SimpleNamespace(words_splitter=WhitespaceTokenSplitter()))
    sentence = TaggedSentence(WORDS, ["O", "B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "I-LOC", "O"])
    example = training_example(splitter, sentence, NAMES)
    tokens = example["tokenized_text"]
    assert tokens[:6] == ["Mr", ".", "John", "Smith", "lives", "in"] and tokens[6:10] == ["U", ".", "S", "."]
    assert example["ner"] == [[2, 3, "person"], [6, 11, "location"]]


class Scripted(torch.nn.Module):
    """A model whose dev predictions after each epoch are scripted: John is found at epochs named in ``hits``."""

    def __init__(self, hits):
        super().__init__()
        self.weight, self.hits, self.epoch = torch.nn.Parameter(torch.zeros(1)), hits, 0

    def inference(self, texts, labels, **kwargs):
        self.epoch += 1
        with torch.no_grad():
            self.weight.fill_(self.epoch)
        found = [{"start": 0, "end": 4, "label": "person"}] if self.epoch in self.hits else []
        return [found] + [[] for _ in texts[1:]]          # the first sentence's name only


def test_the_epoch_with_the_best_dev_f1_is_kept_the_first_of_equals():
    dev = [TaggedSentence(["John", "ran"], ["B-PER", "O"]), TaggedSentence(["Mary", "ran"], ["B-PER", "O"])]
    model = Scripted(hits={2, 3})                        # F1 0, 66.7, 66.7, 0 after epochs 1-4
    keep = BestOnDev(model, dev, NAMES, OmegaConf.create({"threshold": 0.5, "batch_size": 8}))
    for _ in range(4):
        keep.on_epoch_end(None, None, None)
    keep.on_train_end(None, None, None)
    assert keep.curve == [0.0, pytest.approx(200 / 3), pytest.approx(200 / 3), 0.0]      # span F1 in %
    assert model.weight.item() == 2                      # epoch 2's weights, not the last epoch's


@pytest.mark.parametrize("others_lr, expected", [(None, 5e-5), (1e-3, 1e-3)])
def test_the_span_layers_train_at_their_own_rate_else_the_encoders(monkeypatch, tmp_path, others_lr, expected):
    import gliner.training

    from aclm.steps import spans

    seen = {}

    def arguments(**kwargs):
        seen.update(kwargs)
        raise InterruptedError("arguments seen")

    monkeypatch.setattr(gliner.training, "TrainingArguments", arguments)
    monkeypatch.setattr(spans, "training_example", lambda model, sentence, names: {})
    cfg = load_config(["profile=mini", f"gliner.others_lr={'null' if others_lr is None else others_lr}"]).gliner
    with pytest.raises(InterruptedError):
        spans.finetune(Scripted(hits=set()), [], [], NAMES, cfg, 1, tmp_path)
    assert (seen["learning_rate"], seen["others_lr"]) == (5e-5, expected)


def test_the_span_methods_chains():
    zero = chain(load_config(["profile=tiny", "method=gliner_zero_shot"]))
    tuned = chain(load_config(["profile=tiny", "method=gliner_finetuned"]))
    assert [s.name for s in zero] == [layout.DATA, layout.S7_EVAL]
    assert [s.name for s in tuned] == [layout.DATA, layout.S7, layout.S7_EVAL]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gliner_zero_shot", "gliner_finetuned"])
def test_a_span_method_runs_end_to_end_and_is_scored_by_the_projects_scorer(tiny_models, tmp_path, method):
    scores = run_to_result(load_config(["profile=tiny", f"method={method}", f"run_dir={tmp_path}",
                                        "gliner.threshold=0.2"]))
    result = json.loads((scores / layout.RESULT).read_text())
    assert result["f1"] == pytest.approx(f1_of_predictions(scores, "sample/en"))
    assert result["sizes"]["train"] == (0 if method == "gliner_zero_shot" else result["sizes"]["gold"])
    if method == "gliner_finetuned":
        training = result["training"]
        assert len(training["dev_f1_by_epoch"]) == 2 and result["dev_f1"] == max(training["dev_f1_by_epoch"])
        assert (scores.parent / layout.S7 / "gliner" / "gliner_config.json").is_file()
