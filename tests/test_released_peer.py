"""The ``reference_code`` profile against an independent restatement of the released scripts (released_peer.py).

A seeded corpus of generations, each a clean linearized sentence with zero
to three kinds of damage, is read by the project under the profile's
settings and by the peer; both must keep the same generations with the same
words and tags.  Left out of the comparison, and checked to stay clean CoNLL
instead: the cases where the released script writes broken CoNLL
(docs/reference-code.md).  The same holds for templates, the comma-splitting
reader, S6 and LwTR's statistics on the English 100-sample.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest


from aclm.base.config import load_config
from aclm.base.data import TaggedSentence, split_at_commas
from aclm.base.datasets import load_split
from aclm.stages.augment import augment_stage
from aclm.stages.generation import generation_stage
from aclm.stages.keywords import keywords_stage
from aclm.stages.postprocess import postprocess_stage
from aclm.steps import generation
from aclm.steps.labels import linearize
from aclm.steps.postprocess import filter_augmentations
from aclm.steps.screening import COUNT_KEYS
from aclm.steps.templates import Piece, dynamic_mask, join, render, skeleton
from baselines.lwtr import ENGLISH_FUNCTION_WORDS, augment
import released_peer as peer

TYPES = ["CORP", "CW", "GRP", "LOC", "PER", "PROD"]
WORDS = ("the band played in paris after ann 's u.s. co-founded tour , . ( ) 1959 x<y wie "
         "हिंदी 東京 über café — ;;").split()
REFERENCE = load_config(["profile=reference_code", "method=aclm"])
PAPER = load_config(["profile=paper", "method=aclm"])


# --------------------------------------------------------------------------- a corpus of damaged generations


def clean_pieces(rng: random.Random) -> list[str]:
    """A linearized sentence of 1-12 words, some of them entity runs, as a list of words and label tokens."""
    tokens, tags = [], []
    while len(tokens) < rng.randint(1, 12):
        if rng.random() < 0.35:
            etype = rng.choice(TYPES)
            run = rng.randint(1, 3)
            tokens += rng.choices(WORDS, k=run)
            tags += [f"B-{etype}"] + [f"I-{etype}"] * (run - 1)
        else:
            tokens.append(rng.choice(WORDS))
            tags.append("O")
    return linearize(tokens, tags)


def label_positions(pieces: list[str]) -> list[int]:
    return [i for i, piece in enumerate(pieces) if piece.startswith("<") and piece.endswith(">")]


def any_label(rng: random.Random) -> str:
    return f"<{rng.choice('bi')}-{rng.choice(TYPES).lower()}>"


def swap_a_label(pieces, rng):
    """A pair closed (or opened) by another label token."""
    spots = label_positions(pieces)
    if spots:
        pieces[rng.choice(spots)] = any_label(rng)


def double_a_label(pieces, rng):
    spots = label_positions(pieces)
    if spots:
        i = rng.choice(spots)
        pieces.insert(i, pieces[i])


def open_with_i(pieces, rng):
    """An entity that opens with an ``I-`` tag (both of its label tokens)."""
    for i in label_positions(pieces):
        pieces[i] = pieces[i].replace("<b-", "<i-")


def several_words_in_a_pair(pieces, rng):
    """Two adjacent pairs merged into one (the closer and the next opener removed), or a word pushed in."""
    spots = label_positions(pieces)
    pairs = [i for i in spots if i + 1 in spots]
    if pairs and rng.random() < 0.5:
        i = rng.choice(pairs)
        del pieces[i:i + 2]
    elif spots:
        pieces.insert(rng.choice(spots) + 1, rng.choice(WORDS))


def empty_output(pieces, rng):
    pieces[:] = rng.choice([[], ["</s>"], ["en_XX", "</s>"], ["<pad>", "<pad>"]])


def unfilled_mask(pieces, rng):
    mask = rng.choice(["<mask>", "<mask>.", "x<mask>", "a<mask>b"])
    pieces.insert(rng.randint(0, len(pieces)), mask)


def unknown_label(pieces, rng):
    bad = rng.choice(["<b-foo>", "<B-PER>", "<o>", "<>", "<b-per-x>"])
    i = rng.randint(0, len(pieces))
    pieces[i:i] = [bad, rng.choice(WORDS), bad] if rng.random() < 0.7 else [bad]


def glue_a_label(pieces, rng):
    spots = label_positions(pieces)
    if not spots:
        return
    i = rng.choice(spots)
    word = rng.choice(WORDS)
    pieces[i] = rng.choice([pieces[i] + word, word + pieces[i], word + pieces[i] + word])


def drop_a_label(pieces, rng):
    """A missing closer or opener."""
    spots = label_positions(pieces)
    if spots:
        del pieces[rng.choice(spots)]


def language_code(pieces, rng):
    code = rng.choice(["en_XX", "hi_IN", "de_DE", "zh_CN"])
    i = rng.randint(0, len(pieces))
    if pieces and i < len(pieces) and rng.random() < 0.4 and pieces[i].startswith("<"):
        pieces[i] = code + pieces[i]                       # glued to a label token, as decoding may leave it
    else:
        pieces.insert(i, code)


def special_tokens(pieces, rng):
    marker = rng.choice(peer.SEQUENCE_MARKERS)
    if pieces and rng.random() < 0.5:
        pieces[-1] += marker                               # "paris</s>"
    else:
        pieces.insert(rng.randint(0, len(pieces)), marker)


def stray_bracket(pieces, rng):
    pieces.insert(rng.randint(0, len(pieces)), rng.choice(["<", ">", "a>", "<a", "->", "<-"]))


def empty_pair(pieces, rng):
    """A pair with no word inside: the released script writes an empty word (a listed case)."""
    label = any_label(rng)
    pieces[rng.randint(0, len(pieces)):0] = [label, label]


def other_whitespace(pieces, rng):
    """A tab, line break or no-break space between or inside words (a listed case)."""
    if pieces:
        i = rng.randrange(len(pieces))
        pieces[i] = rng.choice(["\t", "\n", "\u00a0"]).join([pieces[i], rng.choice(WORDS)])


DAMAGE = (swap_a_label, double_a_label, open_with_i, several_words_in_a_pair, empty_output, unfilled_mask,
          unknown_label, glue_a_label, drop_a_label, language_code, special_tokens, stray_bracket, empty_pair,
          other_whitespace)


def damaged(pieces: list[str], rng: random.Random) -> tuple[str, list[str]]:
    """The sentence with 0-3 kinds of damage, as text with some doubled, leading or trailing spaces."""
    pieces = list(pieces)
    kinds = rng.sample(DAMAGE, rng.choice([0, 1, 1, 2, 3]))
    for kind in kinds:
        kind(pieces, rng)
    text = "".join(" " * rng.choice([1, 1, 1, 2]) + piece for piece in pieces)
    if rng.random() < 0.8:
        text = text.lstrip(" ")
    if rng.random() < 0.1:
        text += " "
    return text, [kind.__name__ for kind in kinds]


def corpus(sources: int = 300, rounds: int = 8, seed: int = 0) -> tuple[list[int], list[str], list[list[str]],
                                                                        list[list[str]]]:
    """Generations for ``sources`` sentences, ``rounds`` each: some repeats, some copies of the source."""
    rng = random.Random(seed)
    ids, texts, kinds, originals = [], [], [], []
    for source in range(sources):
        pieces = clean_pieces(rng)
        originals.append(pieces)
        for _ in range(rounds):
            earlier = [t for i, t in zip(ids, texts) if i == source]
            if earlier and rng.random() < 0.08:
                text, kind = rng.choice(earlier), ["repeat"]
            elif rng.random() < 0.04:
                text, kind = " ".join(pieces), ["copy_of_source"]
            else:
                text, kind = damaged(pieces, rng)
            ids.append(source)
            texts.append(text)
            kinds.append(kind)
    return ids, texts, kinds, originals


def is_listed(text: str, lines: list[str] | None) -> bool:
    """A case where the released script writes broken CoNLL: whitespace other than a space, or an empty word."""
    decoded = peer.after_decoding(text)
    return any(c.isspace() and c != " " for c in decoded) or any(line.startswith("\t") for line in lines or [])


def project_reading(ids: list[int], texts: list[str], cfg) -> tuple[list[tuple | None], dict]:
    jobs = [generation.Job(source, 0, None, "") for source in ids]
    rows, counts = generation.screen(jobs, texts, TYPES, cfg.generation.parse, cfg.generation.dedupe)
    return [(row["tokens"], row["tags"]) if row["status"] == "kept" else None for row in rows], counts


def peer_reading(ids: list[int], texts: list[str], remove_repetitions: bool) -> list[tuple | None]:
    verdicts = []
    for lines in peer.s5_keep(ids, texts, TYPES, remove_repetitions):
        pairs = [line.rsplit("\t", 1) for line in lines] if lines else None
        verdicts.append(([w for w, _ in pairs], [t for _, t in pairs]) if pairs else None)
    return verdicts


def agreement(cfg) -> tuple[int, int, list[int]]:
    """(agreeing, compared, listed indices) over the corpus, reading it with ``cfg``'s settings."""
    ids, texts, _, _ = corpus()
    ours, _ = project_reading(ids, texts, cfg)
    listed = [i for i, lines in enumerate(peer.s5_keep(ids, texts, TYPES)) if is_listed(texts[i], lines)]
    theirs = peer_reading(ids, texts, cfg.generation.dedupe == "raw")
    compared = [i for i in range(len(texts)) if i not in set(listed)]
    return sum(ours[i] == theirs[i] for i in compared), len(compared), listed


# --------------------------------------------------------------------------- S5: validity, parsing, repeats


def test_the_corpus_covers_every_kind_of_damage_and_the_peer_keeps_and_drops():
    ids, texts, kinds, _ = corpus()
    assert len(texts) >= 2000
    counted = {name: sum(name in k for k in kinds) for name in [d.__name__ for d in DAMAGE]}
    assert min(counted.values()) >= 100, counted
    assert sum("repeat" in k for k in kinds) >= 100 and sum("copy_of_source" in k for k in kinds) >= 50
    verdicts = peer.s5_keep(ids, texts, TYPES)
    assert 0.2 < sum(v is not None for v in verdicts) / len(verdicts) < 0.8


@pytest.mark.parametrize("dedupe", ["off", "raw"])
def test_reference_code_reads_generations_as_the_released_script(dedupe):
    """``off`` as the shell scripts run it, ``raw`` as the script's own default removes repetitions."""
    agree, compared, listed = agreement(load_config(["profile=reference_code", "method=aclm",
                                                     f"generation.dedupe={dedupe}"]))
    assert (agree, compared) == (compared, 2400 - len(listed))
    assert len(listed) < 400


def test_the_comparison_tells_the_strict_reading_apart():
    agree, compared, _ = agreement(PAPER)
    assert agree < compared - 300


def test_listed_cases_are_written_as_clean_conll():
    ids, texts, _, _ = corpus()
    ours, _ = project_reading(ids, texts, REFERENCE)
    listed = [i for i, lines in enumerate(peer.s5_keep(ids, texts, TYPES)) if is_listed(texts[i], lines)]
    assert listed
    for i in listed:
        if ours[i] is not None:
            tokens, _ = ours[i]
            assert all(token and token == token.strip() and not any(c.isspace() and c != " " for c in token)
                       for token in tokens)


def test_every_rejection_is_counted_under_a_named_reason():
    ids, texts, _, _ = corpus()
    verdicts, counts = project_reading(ids, texts, REFERENCE)
    assert tuple(counts) == COUNT_KEYS and counts["generated"] == len(texts)
    assert counts["kept"] == sum(v is not None for v in verdicts)
    assert counts["duplicate"] == 0 < project_reading(ids, texts, PAPER)[1]["duplicate"]
    for reason in ("empty", "unknown_tag", "unpaired_tag", "glued_tag", "unfilled_mask"):
        assert counts[f"malformed_{reason}"] > 0, reason


# --------------------------------------------------------------------------- S6


def guessed_tags(tokens: list[str], tags: list[str]) -> list[str]:
    """A stand-in gold tagger: right on some sentences (predicting B- at every entity start), all O on others."""
    return peer.as_read_back(tags) if len(tokens) % 3 else ["O"] * len(tokens)


def test_s6_keeps_what_the_released_post_processing_keeps():
    ids, texts, kinds, originals = corpus()
    read, _ = project_reading(ids, texts, REFERENCE)
    kept = [(i, r) for i, r in enumerate(read) if r is not None]
    sources = {i: peer_sentence(originals[ids[i]]) for i, _ in kept}
    candidates = [(TaggedSentence(*r), [sources[i]]) for i, r in kept]
    ours, counts = filter_augmentations(candidates, REFERENCE.postprocess,
                                        lambda sents: [guessed_tags(s.tokens, s.tags) for s in sents])
    theirs = peer.s6_keep([r for _, r in kept], [guessed_tags(*r) for _, r in kept])
    assert [(a.tokens, a.tags) for a, _ in ours] == [r for (_, r), keep in zip(kept, theirs) if keep]
    copies = sum(a.tokens == src[0].tokens for a, src in ours)
    assert copies > 0 and counts["copy_of_source"] == 0
    assert any(a.tags[0].startswith("I-") for a, _ in ours)          # an I- opening passes the filter
    assert filter_augmentations(candidates, PAPER.postprocess)[1]["copy_of_source"] >= copies


def peer_sentence(pieces: list[str]) -> TaggedSentence:
    words, tags = zip(*(line.rsplit("\t", 1) for line in peer.written_lines(" ".join(pieces))))
    return TaggedSentence(list(words), list(tags))


# --------------------------------------------------------------------------- S3 templates and the S2 reader


def test_templates_and_mixner_join_match_the_released_sketch():
    rng = random.Random(3)
    for case in range(600):
        a, b = (random_skeleton_input(rng) for _ in range(2))
        mixed = case % 3 == 0
        pieces = join(skeleton(*a[:2]), skeleton(*b[:2])) if mixed else skeleton(*a[:2])
        ours = render(dynamic_mask(pieces, random.Random(case)), "<mask>")
        words, tags, flags = ([*a[0].tokens, *b[0].tokens], [*a[0].tags, *b[0].tags], a[2] + b[2]) if mixed \
            else (a[0].tokens, a[0].tags, a[2])
        assert ours == peer.sketch(words, tags, flags, random.Random(case)), case


def random_skeleton_input(rng: random.Random) -> tuple[TaggedSentence, list[int], list[bool]]:
    """A sentence, its keyword indices, and the released attention flags for the same keywords."""
    pieces = clean_pieces(rng)
    words, tags = zip(*(line.rsplit("\t", 1) for line in peer.written_lines(" ".join(pieces))))
    flags = [rng.random() < 0.4 for _ in words]
    return TaggedSentence(list(words), list(tags)), [i for i, f in enumerate(flags) if f], flags


def test_static_template_equals_the_released_sketch_with_nothing_drawn():
    sentence = TaggedSentence("ann sang in new york".split(), ["B-PER", "O", "O", "B-LOC", "I-LOC"])
    pieces = [replace(p, role="mask") if p.role == "keyword" else p for p in skeleton(sentence, [1])]
    assert render(pieces, "<mask>") == peer.sketch(sentence.tokens, sentence.tags, [False] * 5, random.Random(0))
    assert pieces[1] == Piece("sang", "O", "mask")


@pytest.mark.parametrize("token, tag", [(",", "O"), (",,", "B-PER"), (",x", "B-LOC"), ("x,", "I-LOC"),
                                        ("a,b,c", "B-CW"), ("25,000th", "O"), ("x,\u0307", "B-PER"),
                                        ("i\u0307ngiliz", "O")])
def test_comma_splitting_matches_the_released_reader(token, tag):
    ours = split_at_commas(TaggedSentence([token], [tag]))
    assert list(zip(ours.tokens, ours.tags)) == peer.split_token(token, tag)


def test_comma_splitting_on_the_released_samples(shared_data):
    for language, affected in (("de", 29), ("hi", 43)):
        sample = load_split(f"multiconer/{language}", 100, shared_data)
        for sentence in sample:
            ours = split_at_commas(sentence)
            assert list(zip(ours.tokens, ours.tags)) == [pair for token, tag in zip(sentence.tokens, sentence.tags)
                                                         for pair in peer.split_token(token, tag)]
        assert sum(split_at_commas(s).tokens != s.tokens for s in sample) == affected


# --------------------------------------------------------------------------- LwTR


def lwtr_statistics(gold: list[TaggedSentence], variant: str) -> dict:
    kept, counts = augment(gold, 0.3, 5, seed=1, variant=variant)
    pairs = [(w0, w1) for a in kept for w0, w1 in zip(gold[a.meta["source_index"]].tokens, a.tokens)]
    per_gold = {i: sum(a.meta["source_index"] == i for a in kept) for i in range(len(gold))}
    return {"share": sum(w0 != w1 for w0, w1 in pairs) / len(pairs),
            "function_words_replaced": sum(w0 != w1 and w0 in ENGLISH_FUNCTION_WORDS for w0, w1 in pairs),
            "function_words_drawn": sum(w0 != w1 and w1 in ENGLISH_FUNCTION_WORDS for w0, w1 in pairs),
            "per_gold": set(per_gold.values()),
            "copies": sum(a.tokens == gold[a.meta["source_index"]].tokens for a in kept), "counts": counts}


def test_lwtr_released_matches_the_released_files_statistics(shared_data):
    """The released en 100 file: 18.92% of tokens changed, function words never, 5 per gold sentence."""
    gold = load_split("multiconer/en", 100, shared_data)
    released = lwtr_statistics(gold, "released")
    assert released["share"] == pytest.approx(0.189, abs=0.02)
    assert released["function_words_replaced"] == released["function_words_drawn"] == 0
    assert released["per_gold"] == {5} and released["copies"] > 0
    assert released["counts"]["copy"] == released["counts"]["duplicate"] == 0
    paper = lwtr_statistics(gold, "paper")
    assert paper["share"] > 0.189 + 0.05 and paper["function_words_replaced"] > 0 and paper["per_gold"] != {5}


# --------------------------------------------------------------------------- the switches reach their stages


def test_each_switch_is_in_its_stages_fingerprint():
    s5 = generation_stage.fingerprint(REFERENCE)["generation"]
    assert (s5["parse"], s5["dedupe"], s5["force_first_token"]) == ("released", "off", False)
    assert keywords_stage.fingerprint(REFERENCE)["keywords"]["split_commas"] is True
    assert postprocess_stage.fingerprint(REFERENCE)["postprocess"]["drop_copies"] is False
    lwtr = load_config(["profile=reference_code", "method=lwtr"])
    assert augment_stage.fingerprint(lwtr)["lwtr"] == {"p": 0.3, "variant": "replay", "replay_seed": 26}
    defaults = load_config(["method=lwtr"])
    assert (defaults.lwtr.variant, defaults.generation.parse, defaults.generation.dedupe,
            defaults.postprocess.drop_copies, defaults.keywords.split_commas) == ("paper", "strict", "parsed",
                                                                                 True, False)
