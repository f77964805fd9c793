"""S2: keywords from the S1 tagger's attention, per gold sentence (``s2_keywords/{train,dev}.jsonl``)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from aclm.base.data import TaggedSentence, split_at_commas
from aclm.base.io import write_jsonl
from aclm.base.layers import NEEDS_ATTENTION
from aclm.base.runtime import select_device
from aclm.stages import layout, outputs
from aclm.stages.declare import stage


def generator_view(sentences: list[TaggedSentence], split_commas: bool) -> list[TaggedSentence]:
    """The gold sentences S2-S5 work on: as they are, or with tokens split at commas (``keywords.split_commas``,
    the released S2 reader; S1 and the gold part of S6's output keep the tokens as given)."""
    return [split_at_commas(s) for s in sentences] if split_commas else sentences


@stage(layout.S2, keys=("keywords", "seed"), loads=(layout.S1,))
def keywords_stage(c: DictConfig, out: Path, data: Path, s1_ner: Path) -> dict:
    from aclm.steps.keywords import keywords_of_split
    from aclm.steps.ner import load_tagger

    device = select_device(c.device)
    model = tokenizer = None
    if c.keywords.selection in NEEDS_ATTENTION:
        tagger = load_tagger(outputs.tagger_model(s1_ner))
        model, tokenizer = tagger.embeddings.model.to(device), tagger.embeddings.tokenizer
    facts = {}
    for split in layout.SPLITS:
        sentences = generator_view(outputs.gold(data, split), c.keywords.split_commas)
        records, counts = keywords_of_split(model, tokenizer, sentences, outputs.sentence_languages(data, split),
                                            c.keywords, device, c.seed)
        write_jsonl(out / layout.rows_file(split), [{"tokens": s.tokens, "tags": s.tags, **r}
                                                    for s, r in zip(sentences, records)])
        facts[split] = dict(counts)
    return facts
