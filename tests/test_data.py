"""Readers, writers and tag normalisation."""

import re

import pytest

from aclm.base.data import (DataError, TaggedSentence, bio_spans, check_label_sets, normalise_tags, read_conll,
                            write_conll)
from aclm.base.io import read_jsonl, write_jsonl


def write(tmp_path, text, name="f.conll"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_token_tag_format(tmp_path):
    path = write(tmp_path, "song\tB-PER\nkang-ho\tI-PER\nacts\tO\n\nhi\tO\n")
    s = read_conll(path)
    assert [x.tokens for x in s] == [["song", "kang-ho", "acts"], ["hi"]]
    assert s[0].tags == ["B-PER", "I-PER", "O"]
    assert s[0].meta["source"] == f"{path}:1"


def test_index_format_with_docstart(tmp_path):
    path = write(tmp_path, "0\t-DOCSTART-\tO\n\n0\tEU\tB-ORG\n1\trejects\tO\n2\tGerman\tB-MISC\n\n"
                           "0\tPeter\tB-PER\n1\tBlackburn\tI-PER\n")
    s = read_conll(path)
    assert [x.tokens for x in s] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert s[1].tags == ["B-PER", "I-PER"]


def test_offset_format(tmp_path):
    path = write(tmp_path, "We\t0\tO\ninvestigate\t3\tO\nmachine\t15\tB-TASK\ntranslation\t23\tI-TASK\n")
    assert read_conll(path)[0].tags == ["O", "O", "B-TASK", "I-TASK"]


def test_offset_format_is_not_mistaken_for_index(tmp_path):
    # the first column is numeric, but does not count 0, 1, 2 ... within the sentence
    path = write(tmp_path, "2019\t0\tO\nresults\t5\tO\n")
    assert read_conll(path)[0].tokens == ["2019", "results"]


def test_index_format_counting_from_one(tmp_path):
    # CoNLL-U's word IDs count from 1
    path = write(tmp_path, "1\t-DOCSTART-\tO\n\n1\tEU\tB-ORG\n2\trejects\tO\n3\t1990\tO\n\n1\tPeter\tB-PER\n")
    s = read_conll(path)
    assert [x.tokens for x in s] == [["EU", "rejects", "1990"], ["Peter"]]
    assert s[0].tags == ["B-ORG", "O", "O"]


def test_index_from_one_beside_whole_numbers_is_an_error(tmp_path):
    # the words 1 and 2 at character offsets 0 and 2, or words 0 and 2 numbered 1 and 2: either reading fits
    path = write(tmp_path, "\n1\t0\tO\n2\t2\tO\n\nWe\t4\tO\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:2: cannot tell the column layout: .*counts "
                                        rf"the words from 1.*format: index_token_tag or format: token_offset_tag"):
        read_conll(path)
    assert read_conll(path, "token_offset_tag")[0].tokens == ["1", "2"]


def test_multiconer_official_format(tmp_path):
    path = write(tmp_path, "# id 6a3b\tdomain=en\nthe _ _ O\nbeatles _ _ B-GRP\n\n# id 77\tdomain=en\nhi _ _ O\n")
    s = read_conll(path)
    assert [x.tokens for x in s] == [["the", "beatles"], ["hi"]]
    assert s[0].tags == ["O", "B-GRP"]


def test_stray_whitespace_is_stripped(tmp_path):
    path = write(tmp_path, "  paris \t B-LOC \n\n\n\nrome\tB-LOC  \n")
    assert [(x.tokens, x.tags) for x in read_conll(path)] == [(["paris"], ["B-LOC"]), (["rome"], ["B-LOC"])]


@pytest.mark.parametrize("text,line,message", [
    ("a\tO\nb\tO\textra\n", 2, "expected 2 columns"),
    ("a\tO\nb\tX-PER\n", 2, "not in the BIO scheme"),
    ("a\tO\n\nb\tPER\n", 3, "not in the BIO scheme"),
    ("a\tO\nb\tB-\n", 2, "not in the BIO scheme"),
])
def test_malformed_input_names_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(DataError, match=rf"{path}:{line}: .*{message}"):
        read_conll(path, "token_tag")


def test_empty_token_is_an_error(tmp_path):
    path = write(tmp_path, "a\tO\n\tO\n")
    with pytest.raises(DataError, match=rf"{path}:2: "):
        read_conll(path, "token_tag")


def test_malformed_offset_file(tmp_path):
    path = write(tmp_path, "We\t0\tO\ninvestigate\tO\n")
    with pytest.raises(DataError, match=rf"{path}:2: expected 3 columns"):
        read_conll(path)


@pytest.mark.parametrize("tags,expected", [
    (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),             # entity opened by I-
    (["O", "I-LOC"], ["O", "B-LOC"]),
    (["B-PER", "I-LOC"], ["B-PER", "B-LOC"]),                         # I- of another type opens an entity
    (["b-per", "i-per", "o"], ["B-PER", "I-PER", "O"]),               # prefix case
    (["B-Disease", "i-Disease"], ["B-Disease", "I-Disease"]),         # type case kept
    (["B-PER", "B-PER"], ["B-PER", "B-PER"]),                         # adjacent entities stay apart
])
def test_normalise_tags(tags, expected):
    assert normalise_tags(tags) == expected


def test_reader_normalises(tmp_path):
    path = write(tmp_path, "the\tO\nking's\tI-CW\nletters\tI-CW\n")
    assert read_conll(path)[0].tags == ["O", "B-CW", "I-CW"]


def test_spans():
    assert bio_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]) == [(0, 2, "PER"), (3, 4, "LOC"), (4, 6, "LOC")]


def test_write_read_round_trip(tmp_path):
    sentences = [TaggedSentence(["a", "b"], ["B-X", "I-X"]), TaggedSentence(["c"], ["O"])]
    write_conll(tmp_path / "out.conll", sentences)
    back = read_conll(tmp_path / "out.conll")
    assert [(s.tokens, s.tags) for s in back] == [(s.tokens, s.tags) for s in sentences]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_label_sets_that_differ_between_splits():
    train = [TaggedSentence(["a"], ["B-PER"])]
    test = [TaggedSentence(["b"], ["B-LOC"], {"source": "test.conll:7"})]
    assert check_label_sets({"train": train, "dev": train}) == ["PER"]
    with pytest.raises(DataError, match=r"test.conll:7: split 'test' has entity types \['LOC'\]"):
        check_label_sets({"train": train, "test": test})


def test_sentence_rejects_length_mismatch():
    with pytest.raises(DataError):
        TaggedSentence(["a", "b"], ["O"])


def test_mixed_multiconer_lines_in_one_file(tmp_path):
    path = write(tmp_path, "the\tO\nbeatles\tB-GRP\n\nв _ _ O\nмоскве _ _ B-LOC\n")
    assert [s.tags for s in read_conll(path)] == [["O", "B-GRP"], ["O", "B-LOC"]]
    with pytest.raises(DataError, match=":4: expected 2 columns"):
        read_conll(path, "token_tag")


def test_empty_token_stand_in_is_explicit(tmp_path):
    path = write(tmp_path, "0\tu.\tO\n1\t\tO\n2\t.\tO\n")
    with pytest.raises(DataError, match=rf"{path}:2: empty token"):
        read_conll(path)
    assert read_conll(path, empty_token="_")[0].tokens == ["u.", "_", "."]


# --- encodings, line ends and files without sentences ---------------------------------------

def write_bytes(tmp_path, data, name="f.conll"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data,line,message", [
    ("paris\tB-LOC\n\nbogotá\tB-LOC\n".encode("latin-1"), 3, "not UTF-8"),                # Latin-1
    ("a\tO\nb\tO\nç\tO\n".encode("cp1252"), 3, "not UTF-8"),
    ("\ufeffa\tO\nb\tO\n".encode("utf-16"), None, "UTF-16 byte-order mark"),             # UTF-16 with BOM
    ("a\tO\nb\tO\n".encode("utf-16-be"), 1, "NUL byte"),                                  # UTF-16, no BOM
    (b"a\tO\n\n\x00\x01\x02\x03binary", 3, "NUL byte"),                                   # binary data
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", 1, "NUL byte"),
])
def test_text_that_is_not_utf8_names_file_and_line(tmp_path, data, line, message):
    path = write_bytes(tmp_path, data)
    where = f"{path}:{line}: " if line else f"{path}: "
    with pytest.raises(DataError, match=rf"^{re.escape(where)}.*{message}"):
        read_conll(path)


@pytest.mark.parametrize("text,what", [
    ("", "an empty file"),
    ("\n\n\r\n", "an empty file"),                  # blank lines only
    ("-DOCSTART- -X- -X- O\n", "only -DOCSTART-"),
    ("-DOCSTART-\tO\n\n\n-DOCSTART-\tO\n\n", "only -DOCSTART-"),
    ("0\t-DOCSTART-\tO\n\n", "only -DOCSTART-"),
])
def test_file_without_sentences_is_an_error(tmp_path, text, what):
    path = write(tmp_path, text)
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: no sentences \({re.escape(what)}"):
        read_conll(path)
    assert read_conll(path, allow_empty=True) == []


EXPECTED = [(["EU", "rejects"], ["B-ORG", "O"]), (["Peter"], ["B-PER"])]


@pytest.mark.parametrize("data", [
    b"\xef\xbb\xbfEU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n",                  # UTF-8 BOM (dropped)
    b"EU\tB-ORG\r\nrejects\tO\r\n\r\nPeter\tB-PER\r\n",                        # CRLF
    b"\xef\xbb\xbfEU\tB-ORG\r\nrejects\tO\r\n\r\n\r\nPeter\tB-PER\r\n",        # both
    b"\n\n\nEU\tB-ORG\nrejects\tO\n\n\n\n\nPeter\tB-PER\n\n\n\n",              # runs of blank lines
    b"EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER",                                  # no final newline
    b"-DOCSTART- -X- -X- O\n\nEU\tB-ORG\nrejects\tO\n\nPeter\tB-PER",          # docstart, then sentences
])
def test_harmless_variants_keep_parsing(tmp_path, data):
    path = write_bytes(tmp_path, data)
    assert [(s.tokens, s.tags) for s in read_conll(path)] == EXPECTED


#: Characters str.splitlines takes for line ends that a token may hold.
NOT_LINE_ENDS = ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\r"]


@pytest.mark.parametrize("char", NOT_LINE_ENDS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_ENDS])
def test_only_newline_ends_a_line(tmp_path, char):
    path = write_bytes(tmp_path, f"EU\tB-ORG\r\nre{char}jects\tO\n\nPeter\tB-PER\nsaid\tX\n".encode("utf-8"))
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:5: tag 'X'"):    # line numbers count \n only
        read_conll(path)
    path.write_bytes(path.read_bytes().replace(b"\tX", b"\tO"))
    assert [(s.tokens, s.tags) for s in read_conll(path)] == [(["EU", f"re{char}jects"], ["B-ORG", "O"]),
                                                              (["Peter", "said"], ["B-PER", "O"])]


def test_whitespace_inside_a_space_separated_token_is_a_column_error(tmp_path):
    path = write(tmp_path, "the _ _ O\nbeat\u2028les _ _ B-GRP\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:2: expected \d columns .*found 5"):
        read_conll(path)


def test_jsonl_keeps_what_splitlines_would_cut(tmp_path):
    rows = [{"tokens": [f"a{c}b" for c in NOT_LINE_ENDS]}, {"tokens": ["c"]}]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    assert read_jsonl(tmp_path / "rows.jsonl") == rows


def test_bom_does_not_hide_a_multiconer_id_line(tmp_path):
    path = write_bytes(tmp_path, "\ufeff# id 1\tdomain=en\nthe _ _ O\nbeatles _ _ B-GRP\n".encode("utf-8"))
    assert [(s.tokens, s.tags) for s in read_conll(path)] == [(["the", "beatles"], ["O", "B-GRP"])]


def test_non_ascii_utf8_reads(tmp_path):
    path = write(tmp_path, "bogotá\tB-LOC\nмоскве\tB-LOC\n東京\tB-LOC\n")
    assert read_conll(path)[0].tokens == ["bogotá", "москве", "東京"]
