"""Decoding under the label-token grammar (aclm/steps/constraints.py): hand-checked masks on a toy vocabulary, beam
reordering, and every generation of the tiny generator under 5-beam top-k sampling."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
import torch
from transformers import TopKLogitsWarper


from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, read_conll
from aclm.base.paths import PROJECT_ROOT
from aclm.steps.constraints import LabelGrammar, TokenClasses, sampling_arguments, template_entities
from aclm.steps.generation import Job, build_jobs, decode_jobs
from aclm.steps.labels import label_tokens, parse_generation
from aclm.steps.templates import skeleton

# A toy vocabulary: 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 en_XX, 5 <mask>, 6 "▁", 7 "▁john", 8 "son", 9 "▁went",
# 10 <b-per>, 11 <i-per>, 12 <b-loc>, 13 <i-loc>, 14 <b-xyz> (a label token of a type the data lacks)
V, EOS = 15, 2
WORDS, BLANK, LABELS = {7, 8, 9}, {6}, {10, 11, 12, 13}
TEXT = WORDS | BLANK
ALL = TEXT | LABELS | {EOS}
START = TEXT | LABELS    # no end before a first word
NEVER = {0, 1, 3, 4, 5, 14}
PROMPT = [2, 4]          # decoder start, language code


def mask(ids) -> torch.Tensor:
    out = torch.zeros(V, dtype=torch.bool)
    out[list(ids)] = True
    return out


TOY = TokenClasses(word=mask(WORDS), blank=mask(BLANK), label=mask(LABELS), eos=EOS)


def step(grammar: LabelGrammar, rows: list[list[int]], scores: torch.Tensor | None = None) -> list[set[int]]:
    """One call with these generated rows after the prompt: the tokens each row may write next."""
    ids = torch.tensor([PROMPT + r for r in rows])
    out = grammar(ids, torch.zeros(len(rows), V) if scores is None else scores)
    return [set(torch.isfinite(row).nonzero().flatten().tolist()) for row in out]


def walk(grammar: LabelGrammar, tokens: list[int]) -> list[set[int]]:
    """What one row may write after each prefix of ``tokens`` (the empty one first), step by step."""
    return [step(grammar, [tokens[:i]])[0] for i in range(len(tokens) + 1)]


# --- hand-checked masks --------------------------------------------------------------------------

def test_labels_a_pair_holds_a_word_token_and_closes_with_its_own_label():
    allowed = walk(LabelGrammar(TOY), [10, 6, 7, 8, 10, 9])
    assert allowed == [START,
                       TEXT,             # <b-per> open: no label token, no end; "▁" alone is not a word
                       TEXT,
                       TEXT | {10},      # a word: the same label token may close
                       TEXT | {10},
                       ALL,              # closed
                       ALL]
    assert not any(row & NEVER for row in allowed)


def test_the_tokens_before_the_prompt_ends_are_the_models_own():
    grammar = LabelGrammar(TOY)
    scores = torch.randn(1, V)
    assert torch.equal(grammar(torch.tensor([[2]]), scores), scores)


def test_labels_near_max_length_only_what_can_still_be_closed():
    # max_length 7: the generated tokens take positions 2..5, the end of sequence position 6
    assert walk(LabelGrammar(TOY, max_length=7), [9, 10, 7, 10]) == [
        START, ALL,
        WORDS,           # opened at 3: a word at 4 (a blank would leave no room), closed at 5
        {10},
        {EOS}]
    assert walk(LabelGrammar(TOY, max_length=7), [9, 9])[2] == TEXT | {EOS}   # too late to open a pair


def test_entities_are_written_whole_and_in_order():
    first = [10, 7, 8, 10, 11, 9, 11]           # <b-per> john son <b-per> <i-per> went <i-per>
    second = [12, 9, 12]
    grammar = LabelGrammar(TOY, entities=[[first, second]])
    allowed = walk(grammar, [9, *first, 6, *second, 9])
    assert allowed == [TEXT | {10}, TEXT | {10},                 # free words; only the next entity may open
                       {7}, {8}, {10}, {11}, {9}, {11},          # forced to its end, both words
                       TEXT | {12}, TEXT | {12},
                       {9}, {12},
                       TEXT | {EOS}, TEXT | {EOS}]               # the end only after the last entity


def test_entities_start_when_the_rest_would_no_longer_fit():
    # max_length 8: positions 2..6 for text, the entity needs 3
    assert walk(LabelGrammar(TOY, entities=[[[12, 9, 12]]], max_length=8), [9, 9, 12, 9, 12]) == [
        TEXT | {12}, TEXT | {12}, {12}, {9}, {12}, {EOS}]


def test_entities_that_cannot_all_fit_are_written_while_each_fits_then_the_end():
    # max_length 7: 4 positions for 6 entity tokens: the first entity, then the end, well formed
    assert walk(LabelGrammar(TOY, entities=[[[10, 7, 10], [12, 9, 12]]], max_length=7), [10, 7, 10]) == [
        {10}, {7}, {10}, {EOS}]


def test_a_template_without_entities_decodes_freely():
    assert walk(LabelGrammar(TOY, entities=[[]]), [6, 9]) == [TEXT, TEXT, TEXT | {EOS}]


def test_unpaired_a_tag_is_followed_by_a_word_which_ends_it():
    assert walk(LabelGrammar(TOY, paired=False), [10, 6, 9, 11, 7]) == [
        START, TEXT, TEXT, ALL, TEXT, ALL]


# --- beam search ---------------------------------------------------------------------------------

def test_state_follows_beams_reordered_and_duplicated_within_their_batch_item():
    grammar = LabelGrammar(TOY, entities=[[[10, 7, 10]], [[12, 9, 12]]], group_size=2)
    assert step(grammar, [[], [], [], []]) == [TEXT | {10}, TEXT | {10}, TEXT | {12}, TEXT | {12}]
    assert step(grammar, [[10], [9], [9], [12]]) == [{7}, TEXT | {10}, TEXT | {12}, {9}]
    # item 0 swaps its beams; both beams of item 1 continue its second beam
    assert step(grammar, [[9, 10], [10, 7], [12, 9], [12, 9]]) == [{7}, {10}, {12}, {12}]
    assert step(grammar, [[10, 7, 10], [9, 10, 7], [12, 9, 12], [12, 9, 12]]) == [
        TEXT | {EOS}, {10}, TEXT | {EOS}, TEXT | {EOS}]


def test_a_row_is_never_continued_from_another_batch_items_beam():
    grammar = LabelGrammar(TOY, group_size=2)
    step(grammar, [[], [], [], []])
    step(grammar, [[10], [9], [7], [8]])
    with pytest.raises(RuntimeError, match="continues none"):
        step(grammar, [[10, 7], [10, 7], [10, 7], [8, 9]])


def test_a_row_the_grammar_would_empty_is_left_as_the_other_processors_made_it():
    grammar = LabelGrammar(TOY)
    step(grammar, [[]])
    forced_end = torch.full((1, V), float("-inf"))
    forced_end[0, EOS] = 0.0                       # a forced end of sequence, with a pair open
    assert step(grammar, [[10]], forced_end) == [{EOS}]


def test_the_top_k_cut_comes_after_the_grammar():
    grammar = LabelGrammar(TOY)
    arguments = sampling_arguments(grammar, top_k=10, num_beams=5)
    assert arguments["top_k"] == 0
    first, warper = arguments["logits_processor"]
    assert first is grammar and isinstance(warper, TopKLogitsWarper) and warper.top_k == 10
    assert sampling_arguments(None, top_k=10, num_beams=5) == {"top_k": 10}


# --- vocabulary and templates --------------------------------------------------------------------

def test_token_classes_of_an_mbart_tokenizer(tiny_generator):
    _, tokenizer = tiny_generator
    classes = TokenClasses.of(tokenizer, LABELS_TINY)
    vocab = tokenizer.get_vocab()
    assert classes.blank[vocab["▁"]] and not classes.word[vocab["▁"]]
    assert classes.word[tokenizer("john", add_special_tokens=False)["input_ids"]].all()
    for token in ("<mask>", "<unk>", "<s>", "<pad>", "</s>", "en_XX", "de_DE"):
        assert not (classes.word[vocab[token]] or classes.blank[vocab[token]] or classes.label[vocab[token]])
    assert {tokenizer.convert_ids_to_tokens(i) for i in classes.label.nonzero().flatten().tolist()} == set(LABELS_TINY)
    with pytest.raises(ValueError, match="not tokens"):
        TokenClasses.of(tokenizer, ["<b-xyz>"])


def test_template_entities_group_pairs_as_the_parser_reads_them():
    template = ("<b-per> john <b-per> <i-per> smith <i-per> <mask> <b-per> ann <b-per> <b-loc> rome <b-loc> "
                "<i-per> bo <i-per> went <i-loc> x <i-loc>")
    assert template_entities(template, label_tokens(["PER", "LOC"])) == [
        "<b-per> john <b-per> <i-per> smith <i-per>", "<b-per> ann <b-per>", "<b-loc> rome <b-loc>",
        "<i-per> bo <i-per>", "<i-loc> x <i-loc>"]


def test_a_bare_off_on_the_command_line_is_the_mode_off():
    assert load_config(["profile=tiny", "generation.constrained=off"]).generation.constrained == "off"


# --- the tiny generator, 5 beams, top-k 10 sampling -----------------------------------------------

SAMPLE = PROJECT_ROOT / "data" / "sample" / "en" / "train.conll"
TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
LABELS_TINY = label_tokens(TYPES)


@pytest.fixture(scope="module")
def tiny_generator(tiny_models):
    from aclm.steps.generator import add_label_tokens, load_generator

    model, tokenizer = load_generator(str(tiny_models / "mbart-large-50"), "en")
    add_label_tokens(model, tokenizer, TYPES, {})
    return model, tokenizer


def jobs_with_mixner(tokenizer) -> tuple[list[TaggedSentence], list[Job]]:
    """Four rounds per sample sentence, two of them joined with a neighbour's template (mixner)."""
    sentences = read_conll(SAMPLE)
    skeletons = [skeleton(s, [i for i, tag in enumerate(s.tags) if tag == "O" and i % 2]) for s in sentences]
    n = len(sentences)
    partners = [[None, (i + 1) % n, None, (i + 7) % n] for i in range(n)]
    return sentences, build_jobs(skeletons, partners, tokenizer.mask_token, seed=3)


def decode(model, tokenizer, jobs: list[Job], mode: str, **overrides) -> list[str]:
    cfg = load_config(["profile=tiny", f"generation.constrained={mode}", "generation.num_beams=5",
                       "generation.max_length=100", *[f"generation.{k}={v}" for k, v in overrides.items()]])
    return decode_jobs(model, tokenizer, jobs, cfg.generation, LABELS_TINY, ["en_XX"] * len(jobs), 1,
                       torch.device("cpu"))[0]


def entities(sentence: TaggedSentence) -> Counter:
    return Counter((tuple(sentence.tokens[a:b]), t) for a, b, t in sentence.spans())


@pytest.mark.slow
def test_every_generation_parses_and_holds_its_templates_entities(tiny_generator):
    model, tokenizer = tiny_generator
    sentences, jobs = jobs_with_mixner(tokenizer)
    assert len(jobs) >= 200 and sum(j.partner is not None for j in jobs) >= 100
    room = 100 - 3   # max_length less the decoder start, the language code and the end
    assert all(len(tokenizer(" ".join(template_entities(j.template, LABELS_TINY)),
                             add_special_tokens=False)["input_ids"]) <= room for j in jobs)
    outputs = decode(model, tokenizer, jobs, "entities")
    for job, text in zip(jobs, outputs):
        got = entities(parse_generation(text, TYPES))
        wanted = entities(sentences[job.source])
        if job.partner is not None:
            wanted += entities(sentences[job.partner])
        assert got == wanted, (job.template, text)     # exactly the template's entities: none lost, none added
        assert template_entities(text, LABELS_TINY) == template_entities(job.template, LABELS_TINY)


def test_a_generation_that_reached_the_limit_is_truncated_under_drop(tiny_generator):
    from aclm.steps.generation import screen

    model, tokenizer = tiny_generator
    _, jobs = jobs_with_mixner(tokenizer)
    jobs = jobs[:16]
    cfg = load_config(["profile=tiny", "generation.max_length=12"])
    outputs, at_limit = decode_jobs(model, tokenizer, jobs, cfg.generation, LABELS_TINY, ["en_XX"] * len(jobs), 1,
                                    torch.device("cpu"))
    assert at_limit == list(range(len(jobs)))      # 12 tokens end no sentence of the sample
    rows, counts = screen(jobs, outputs, TYPES, cut=at_limit)
    assert counts["malformed_truncated"] == len(jobs) and {r["status"] for r in rows} == {"malformed_truncated"}
    _, kept = screen(jobs, outputs, TYPES)
    assert kept["malformed_truncated"] == 0


def test_under_labels_every_generation_parses(tiny_generator):
    model, tokenizer = tiny_generator
    _, jobs = jobs_with_mixner(tokenizer)
    for text in decode(model, tokenizer, jobs[:80], "labels", max_length=30):
        parse_generation(text, TYPES)


def test_off_decodes_exactly_as_generate_without_a_processor(tiny_generator):
    model, tokenizer = tiny_generator
    _, jobs = jobs_with_mixner(tokenizer)
    jobs = jobs[:12]
    ours = decode(model, tokenizer, jobs, "off", batch_size=len(jobs))
    tokenizer.src_lang = "en_XX"
    # the one batch, longest template first, as decode_jobs orders it
    order = sorted(range(len(jobs)), key=lambda j: (-len(jobs[j].template), j))
    enc = tokenizer([jobs[j].template for j in order], return_tensors="pt", padding=True)
    torch.manual_seed(1)
    plain = model.generate(**enc, do_sample=True, top_k=10, num_beams=5, max_length=100,
                           forced_bos_token_id=tokenizer.convert_tokens_to_ids("en_XX"), num_return_sequences=1)
    from aclm.steps.generation import decode_keeping_labels

    keep = set(tokenizer.convert_tokens_to_ids(LABELS_TINY)) | {tokenizer.mask_token_id}
    expected = {j: decode_keeping_labels(tokenizer, ids, keep) for j, ids in zip(order, plain.tolist())}
    assert ours == [expected[j] for j in range(len(jobs))]
    # a generation reached the limit unless the model ended it (</s> after the decoder start) before
    ended = {j for j, ids in zip(order, plain.tolist()) if tokenizer.eos_token_id in ids[1:99]}
    cfg = load_config(["profile=tiny", "generation.num_beams=5", "generation.max_length=100",
                       f"generation.batch_size={len(jobs)}"])
    _, at_limit = decode_jobs(model, tokenizer, jobs, cfg.generation, LABELS_TINY, ["en_XX"] * len(jobs), 1,
                              torch.device("cpu"))
    assert at_limit == sorted(set(range(len(jobs))) - ended)
    assert hashlib.sha256("\n".join(ours).encode()).hexdigest() != hashlib.sha256(
        "\n".join(decode(model, tokenizer, jobs, "labels", batch_size=len(jobs))).encode()).hexdigest()


# --- the baselines' samplers -----------------------------------------------------------------------

def test_mulda_samples_no_tag_without_a_word_under_labels(tiny_models):
    from baselines.linearize import screen
    from baselines.mulda import sample, setup

    tags = ["B-PER", "I-PER"]
    model, tokenizer = setup(str(tiny_models / "mbart-large-50"), "en", tags, torch.device("cpu"))
    with torch.no_grad():   # make tags likely, so that the random model writes them often
        model.final_logits_bias[0, tokenizer.convert_tokens_to_ids(tags)] += 4.0
        model.final_logits_bias[0, tokenizer.eos_token_id] += 3.0        # ... and short samples

    def malformed(mode: str) -> Counter:
        cfg = load_config(["profile=tiny", "method=mulda", f"generation.constrained={mode}", "mulda.rounds=4",
                           "mulda.max_length=24"]).mulda
        return Counter(screen(sample(model, tokenizer, 8, cfg, tags, seed=0, device=torch.device("cpu")),
                              set(tags), [])[1])

    assert malformed("off")["malformed_tag_without_word"] > 0 and malformed("off")["malformed_empty"] > 0
    assert malformed("labels")["malformed_tag_without_word"] == malformed("labels")["malformed_empty"] == 0


def test_daga_samples_no_tag_without_a_word_under_labels():
    from baselines.daga import PAD, LSTMLanguageModel, Vocabulary, _sample
    from baselines.linearize import linearize, tag_vocabulary

    train = [TaggedSentence("john smith went to paris".split(), "B-PER I-PER O O B-LOC".split())]
    vocab = Vocabulary.build([linearize(s) for s in train])
    torch.manual_seed(0)
    model = LSTMLanguageModel(len(vocab), 8, 8, 0.0, vocab.stoi[PAD])   # untrained: tags come often
    tags = sorted(tag_vocabulary(train))

    def bad(samples) -> int:
        """Tags followed by a tag, or ending a finished sample (a cut-off one is truncated anyway)."""
        return sum(1 for words, done in samples for i, w in enumerate(words)
                   if w in tags and (i + 1 == len(words) and done or i + 1 < len(words) and words[i + 1] in tags))

    free, constrained = _sample(model, vocab, 200, 12, 0, "cpu", 64), _sample(model, vocab, 200, 12, 0, "cpu", 64, tags)
    assert bad(free) > 0 and any(done and not words for words, done in free)
    assert bad(constrained) == 0 and not any(done and not words for words, done in constrained)
