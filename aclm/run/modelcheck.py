"""What ``make preflight`` checks of a profile's real models before a run spends GPU-hours on them: what the
tests' stand-ins cannot show (revision, tokenizer class, length limits, language codes, the generation-config keys
S5 leaves to the checkpoint, label tokens staying single).  A problem stops the preflight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from aclm.base.data import entity_types
from aclm.base.models import hub_revision, is_hub_id, load_path, model_path
from aclm.run.datacheck import load_tokenizer
from aclm.steps.generator import language_code, set_language
from aclm.steps.labels import label_tokens
from aclm.steps.lengths import labelled

#: Generation-config keys that change decoding and that S5's ``generate`` call leaves to the checkpoint.
DECODING_KEYS = ("early_stopping", "no_repeat_ngram_size", "length_penalty", "repetition_penalty", "min_length",
                 "bad_words_ids", "forced_eos_token_id", "decoder_start_token_id")
#: A tokenizer whose model_max_length is above this has none: flair then stops striding long sentences.
NO_LIMIT = 1_000_000


@dataclass
class Findings:
    """Lines to print and problems (each stops the preflight) of one or more checks."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, other: "Findings") -> None:
        self.lines += other.lines
        self.problems += other.problems


def origin(name: str) -> str:
    """Where a model comes from: its hub revision, or its folder."""
    if is_hub_id(name) and not model_path(name).startswith(("/", ".")):
        revision = hub_revision(name)
        return f"hub {name}@{revision}" if revision else f"hub {name} (not cached: loaded by name)"
    return f"folder {model_path(name)}"


def tagger(key: str, name: str) -> Findings:
    """The S1/S7 encoder's tokenizer: its class and a real length limit."""
    tokenizer = load_tokenizer(name)
    unlimited = [f"{key}={name}: its tokenizer has no model_max_length, so flair cannot split sentences longer "
                 f"than the encoder takes"] if tokenizer.model_max_length > NO_LIMIT else []
    return Findings([f"{key}: {origin(name)}; {type(tokenizer).__name__}, {len(tokenizer):,} pieces, "
                     f"model_max_length {tokenizer.model_max_length}"], unlimited)


def generator(key: str, name: str, languages: Sequence[str], sentences) -> Findings:
    """The generator: language codes framing source and target, single label tokens, its decoding keys."""
    from transformers import AutoConfig, GenerationConfig

    found = Findings()
    tokenizer = labelled(load_tokenizer(name), sentences)
    config = AutoConfig.from_pretrained(load_path(name))
    found.lines.append(f"{key}: {origin(name)}; {type(tokenizer).__name__}, {len(tokenizer):,} pieces with the "
                       f"label tokens, {config.vocab_size:,} embedding rows")
    labels = label_tokens(entity_types(sentences))
    split = [t for t in labels if len(tokenizer(t, add_special_tokens=False)["input_ids"]) != 1]
    if split:
        found.problems.append(f"{key}={name}: label tokens not single tokens: {', '.join(split)}")
    for language in languages:
        try:
            code = language_code(tokenizer, language)
        except ValueError as err:
            found.problems.append(f"{key}={name}: {err}")
            continue
        if code is None:
            found.lines.append(f"  {language}: no language codes (a one-language generator)")
            continue
        set_language(tokenizer, code)
        framed = [tokenizer("a")["input_ids"], tokenizer(text_target="a")["input_ids"]]
        wanted = (tokenizer.convert_tokens_to_ids(code), tokenizer.eos_token_id)
        if any((ids[0], ids[-1]) != wanted for ids in framed):
            found.problems.append(f"{key}={name}: {code} does not open source and target before </s> closes "
                                  f"them: {framed}")
        else:
            found.lines.append(f"  {language}: {code} (id {wanted[0]}) opens source and target, </s> closes them")
    try:
        decoding = GenerationConfig.from_pretrained(load_path(name)).to_diff_dict()
    except OSError:
        decoding = {}
    kept = {k: decoding[k] for k in DECODING_KEYS if k in decoding}
    found.lines.append(f"  generation config keys S5 leaves to the checkpoint: {kept or 'none'}")
    return found


def check_models(cfg: DictConfig, languages: Sequence[str], sentences) -> Findings:
    """Every model an ACLM run of ``cfg`` loads (``sentences``: gold sentences, for the label tokens)."""
    found = Findings()
    checks = {"ner.model": lambda n: tagger("ner.model", n),
              "generator.model": lambda n: generator("generator.model", n, languages, sentences)}
    for key, check in checks.items():
        name = str(OmegaConf.select(cfg, key))
        try:
            found.add(check(name))
        except (OSError, ValueError) as err:
            found.problems.append(f"{key}={name} does not load: {err}")
    if cfg.generation.mixner.mode != "off":
        found.lines.append(f"generation.mixner.embedder: {origin(str(cfg.generation.mixner.embedder))}")
    return found

