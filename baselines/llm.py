"""An instruction-tuned causal LM writing new tagged sentences from a few gold ones (docs/reproducing.md).

The baseline the field now expects (ProgGen, LLM-DA): no fine-tuning, only a prompt showing ``llm.shots``
gold sentences in MulDA's linearization; each gold sentence appears in R prompts, so R x N are asked for.
Tags are whole tokens and sampling runs under :class:`aclm.steps.constraints.LabelGrammar` (``paired=False``,
one line), so every response parses; screening is MulDA's. ``prompts.jsonl`` keeps prompts and raw
responses; ``responses_with_tags`` and ``spelled_tags`` show whether a model writes the new tokens.
"""

from __future__ import annotations

import logging
import random
from typing import Mapping, NamedTuple, Sequence

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from aclm.base.augmentation import Gold, kept_row
from aclm.base.data import TaggedSentence
from aclm.base.io import write_jsonl
from aclm.base.models import load_path
from aclm.base.tokens import add_tokens
from aclm.steps.constraints import LabelGrammar, TokenClasses, sampling_arguments
from aclm.steps.generation import decode_keeping_labels
from aclm.steps.labels import type_words
from baselines.linearize import Sample, linearize, screen, tag_vocabulary

log = logging.getLogger("baselines.llm")

PROMPTS = "prompts.jsonl"

#: How a prompt names the datasets' languages (a code not here is named by its code).
LANGUAGE_NAMES = {"en": "English", "de": "German", "es": "Spanish", "nl": "Dutch", "ru": "Russian",
                  "tr": "Turkish", "ko": "Korean", "fa": "Farsi", "hi": "Hindi", "bn": "Bengali", "zh": "Chinese"}


def setup(path: str, tags: Sequence[str], device: torch.device):
    """The model (bf16 on a GPU) and its left-padding tokenizer, with ``tags`` as whole tokens.

    A tag's input (and untied output) row starts as the mean of the pieces spelling it (`` B-PER``), so the
    untrained model reads and writes it roughly as that text (MulDA and ACLM fine-tune from type words).
    """
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    spelled = {tag: tokenizer(" " + tag, add_special_tokens=False)["input_ids"] for tag in tags}
    add_tokens(model, tokenizer, tags)
    matrices = {id(m.weight): m.weight for m in (model.get_input_embeddings(), model.get_output_embeddings())}
    with torch.no_grad():
        for matrix in matrices.values():
            for tag, pieces in spelled.items():
                matrix[tokenizer.convert_tokens_to_ids(tag)] = matrix[pieces].mean(dim=0)
    return model, tokenizer


def token_classes(tokenizer: PreTrainedTokenizerBase, tags: Sequence[str]) -> TokenClasses:
    """The grammar's classes by what each id decodes to (byte-level piece names say nothing); a piece with
    a non-printing character is neither word nor blank, so a response is one line."""
    size = len(tokenizer)
    special = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
    texts = tokenizer.batch_decode([[i] for i in range(size)])
    one_line = [i for i, text in enumerate(texts) if i not in special and text.isprintable() and text]
    word = torch.zeros(size, dtype=torch.bool)
    word[[i for i in one_line if texts[i].strip()]] = True
    blank = torch.zeros(size, dtype=torch.bool)
    blank[[i for i in one_line if not texts[i].strip()]] = True
    label = torch.zeros(size, dtype=torch.bool)
    label[tokenizer.convert_tokens_to_ids(list(tags))] = True
    return TokenClasses(word, blank, label, tokenizer.eos_token_id)


def instruction(template: str, examples: Sequence[TaggedSentence], language: str, types: Sequence[str],
                names: Mapping[str, str]) -> str:
    """``llm.prompt`` filled in: ``{language}``, ``{types}`` (``PER (person), ...``), ``{examples}`` one a line."""
    kinds = ", ".join(f"{t} ({type_words(t, names)})" for t in types)
    lines = "\n".join(" ".join(linearize(s)) for s in examples)
    return template.format(language=LANGUAGE_NAMES.get(language, language), types=kinds, examples=lines)


def prompt_text(tokenizer: PreTrainedTokenizerBase, request: str) -> str:
    """``request`` as the model's user turn where it has a chat template, else as plain text on its own line."""
    if tokenizer.chat_template:
        return tokenizer.apply_chat_template([{"role": "user", "content": request}], tokenize=False,
                                             add_generation_prompt=True)
    return request + "\n"


def demonstrations(languages: Sequence[str], shots: int, rounds: int, seed: int) -> list[list[int]]:
    """Per prompt, the gold sentences shown: each in ``rounds`` prompts, beside ``shots - 1`` random others of
    its language, shuffled."""
    rng = random.Random(seed)
    prompts = []
    for i, language in enumerate(languages):
        others = [j for j, lang in enumerate(languages) if lang == language and j != i]
        for _ in range(rounds):
            shown = [i, *rng.sample(others, min(shots - 1, len(others)))]
            rng.shuffle(shown)
            prompts.append(shown)
    return prompts


class Response(NamedTuple):
    sample: Sample                       # its words (tags as their own words) and whether it ended
    raw: str                             # as decoded, special tokens kept
    tag_tokens: int                      # whole tag tokens written


def context(model) -> int:
    """The positions the model has (GPT-2 calls them ``n_positions``); unbounded where its config says none."""
    config = model.config
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 1 << 30


@torch.inference_mode()
def write(model, tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], cfg: DictConfig,
          classes: TokenClasses, tag_ids: set[int], seed: int, device: torch.device) -> list[Response]:
    """One sampled response per prompt.  The grammar's budget is one position more than the response has,
    so it never forces an end: a response cut at ``max_new_tokens`` parses (no tag last) and counts as unfinished."""
    out = []
    for call, start in enumerate(tqdm(range(0, len(prompts), cfg.batch_size), desc="LLM writes", unit="batch")):
        batch = tokenizer(list(prompts[start:start + cfg.batch_size]), return_tensors="pt", padding=True,
                          add_special_tokens=not tokenizer.chat_template).to(device)
        length = batch["input_ids"].shape[1]
        if length + cfg.max_new_tokens > context(model):
            raise ValueError(f"a prompt of {length} tokens and llm.max_new_tokens={cfg.max_new_tokens} exceed the "
                             f"model's {context(model)} positions: give fewer llm.shots or a shorter llm.prompt")
        grammar = LabelGrammar(classes, paired=False, prompt_length=length, max_length=length + cfg.max_new_tokens + 1)
        torch.manual_seed(seed + call)
        generated = model.generate(**batch, do_sample=True, num_beams=1, temperature=cfg.temperature,
                                   max_new_tokens=cfg.max_new_tokens, eos_token_id=classes.eos,
                                   pad_token_id=tokenizer.pad_token_id, **sampling_arguments(grammar, cfg.top_k, 1))
        for ids in generated[:, length:].tolist():
            finished = classes.eos in ids
            body = ids[:ids.index(classes.eos)] if finished else ids
            words = decode_keeping_labels(tokenizer, body, tag_ids).split()
            out.append(Response((words, finished), tokenizer.decode(body, skip_special_tokens=False),
                                sum(i in tag_ids for i in body)))
    return out


def augment(cfg: DictConfig, gold: Gold) -> tuple[list[dict], dict]:
    """Ask for R x N sentences, each prompt showing a few gold ones; keep the new well-formed ones."""
    if not gold.train:
        raise ValueError("the LLM method needs gold training sentences to show")
    m = cfg.llm
    tags = sorted(tag_vocabulary([*gold.train, *gold.dev]))
    device = torch.device(gold.device)
    model, tokenizer = setup(load_path(m.model), tags, device)
    shown = demonstrations(gold.languages, m.shots, m.rounds, cfg.seed)
    prompts = [prompt_text(tokenizer, instruction(m.prompt, [gold.train[j] for j in js], gold.languages[js[0]],
                                                  gold.types, m.type_names)) for js in shown]
    written = write(model, tokenizer, prompts, m, token_classes(tokenizer, tags),
                    set(tokenizer.convert_tokens_to_ids(tags)), cfg.seed, device)
    write_jsonl(gold.work_dir / PROMPTS, [
        {"sample_index": i, "shown": js, "prompt": prompt, "response": r.raw, "finished": r.sample[1]}
        for i, (js, prompt, r) in enumerate(zip(shown, prompts, written))])
    kept, counts = screen([r.sample for r in written], set(tags), gold.train)
    tagged = sum(r.tag_tokens > 0 for r in written)
    spelled = sum(sum(w in tags for w in r.sample[0]) - r.tag_tokens for r in written)
    log.info("LLM: %d of %d responses kept; %d wrote a tag; %d tags spelled out of ordinary pieces", len(kept),
             len(written), tagged, spelled)
    return ([kept_row(s, [], sample_index=index) for index, s in kept],
            {**counts, "responses_with_tags": tagged, "spelled_tags": spelled})
