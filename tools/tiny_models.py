"""Tiny random-weight stand-ins for the pretrained models used by ACLM (XLM-R, mBART-50, SBERT, GPT-2).

There is no model hub here, yet the pipeline must run end to end on CPU in the demo, the tests and CI:
same architectures, tokenizer classes and special-token conventions as the real checkpoints, so the same
code paths run. ``shape="paper"`` builds the paper's exact dimensions, for measuring compute and memory
only. Same seed and text give byte-identical ``from_pretrained`` folders; a ``manifest.json`` lets an
unchanged build be skipped. Details: docs/cost.md.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import string
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPT2TokenizerFast,
    MBart50TokenizerFast,
    MBartConfig,
    MBartForConditionalGeneration,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
    XLMRobertaModel,
    XLMRobertaTokenizerFast,
)
from transformers.models.mbart50.tokenization_mbart50_fast import FAIRSEQ_LANGUAGE_CODES
from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaPooler

from aclm.base.data import read_conll
from aclm.base.paths import PROJECT_ROOT

DEFAULT_TEXT_DIR = PROJECT_ROOT / "data" / "sample"
DEFAULT_OUT_DIR = PROJECT_ROOT / "models" / "tiny"
MANIFEST_NAME = "manifest.json"

#: The 52 language codes of mBART-50, in the order the real tokenizer assigns ids.
MBART50_LANGUAGE_CODES: tuple[str, ...] = tuple(FAIRSEQ_LANGUAGE_CODES)

# Characters always kept in the SentencePiece vocabularies, so text outside the small
# training corpus (upper case, punctuation, accents) rarely turns into <unk>.
_REQUIRED_CHARS = string.ascii_letters + string.digits + string.punctuation + "äöüßàáâãçèéêëìíîïñòóôõøùúûýÿåæœ"

#: File name of the SentencePiece model inside a tokenizer folder, as on the hub.
SPM_FILE = "sentencepiece.bpe.model"

# XLM-R keeps 12 layers: the method reads attention from layers 8-11. RoBERTa reserves two positions
# (pad offset), so 258 give a model_max_length of 256, as 514 give 512 in xlm-roberta-large.
SPECS: dict[str, dict] = {
    "xlm-roberta": {
        "vocab_size": 2000,
        "model_max_length": 256,
        "config": {
            "hidden_size": 32,
            "num_hidden_layers": 12,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 258,
            "type_vocab_size": 1,
            "layer_norm_eps": 1e-5,
        },
    },
    "mbart-large-50": {
        "vocab_size": 2000,
        "model_max_length": 256,
        "config": {
            "d_model": 32,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "decoder_ffn_dim": 64,
            "max_position_embeddings": 256,
            "scale_embedding": True,
        },
    },
    "sbert": {
        "vocab_size": 2000,
        "model_max_length": 128,
        "config": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 130,
            "type_vocab_size": 1,
            "layer_norm_eps": 1e-5,
        },
    },
    "gpt2": {
        "vocab_size": 2000,
        "model_max_length": 256,
        "config": {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 256},
    },
}


#: The paper's checkpoints' dimensions and embedding rows, over 8k-piece tokenizers: trained on MultiCoNER
#: en's train text, these cut English words into about as many pieces as the real ones, so costs match.
PAPER_SHAPE_SPECS: dict[str, dict] = {
    "xlm-roberta": {  # xlm-roberta-large (S1/S7 tagger, S2 attention)
        "vocab_size": 8000, "embedding_rows": 250_002, "model_max_length": 512,
        "config": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "intermediate_size": 4096, "max_position_embeddings": 514, "type_vocab_size": 1,
                   "layer_norm_eps": 1e-5},
    },
    "xlm-roberta-base": {  # MELM's masked LM
        "vocab_size": 8000, "embedding_rows": 250_002, "model_max_length": 512,
        "config": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "intermediate_size": 3072, "max_position_embeddings": 514, "type_vocab_size": 1,
                   "layer_norm_eps": 1e-5},
    },
    "mbart-large-50": {  # facebook/mbart-large-50: 250,054 rows = 250,001 pieces + 52 codes + <mask>
        "vocab_size": 8000, "embedding_rows": 250_054, "model_max_length": 1024,
        "config": {"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
                   "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
                   "max_position_embeddings": 1024, "scale_embedding": True},
    },
    "sbert": {  # distiluse-base-multilingual-cased-v2: 6 layers x 768 (119,547 rows), mean pooling, dense 768 -> 512
        "vocab_size": 8000, "embedding_rows": 119_547, "model_max_length": 128, "dense_features": 512,
        "config": {"hidden_size": 768, "num_hidden_layers": 6, "num_attention_heads": 12,
                   "intermediate_size": 3072, "max_position_embeddings": 514, "type_vocab_size": 1,
                   "layer_norm_eps": 1e-5},
    },
    "gpt2": {  # gpt2 (124M): perplexity in Table 3
        "vocab_size": 8000, "embedding_rows": 50_257, "model_max_length": 1024,
        "config": {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024},
    },
}

SHAPES: dict[str, dict[str, dict]] = {"tiny": SPECS, "paper": PAPER_SHAPE_SPECS}


# --------------------------------------------------------------------------- text


def collect_text_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders (all ``*.conll`` below them) into a sorted file list."""
    paths = [Path(p) for p in paths]
    files: set[Path] = set()
    for path in paths:
        if path.is_dir():
            files.update(p.resolve() for p in path.rglob("*.conll"))
        elif path.is_file():
            files.add(path.resolve())
        else:
            raise FileNotFoundError(f"no such text file or folder: {path}")
    if not files:
        raise FileNotFoundError(f"no *.conll text found in {', '.join(map(str, paths))}")
    return sorted(files)


def read_sentences(files: Sequence[Path]) -> list[str]:
    """The tokens of each CoNLL sentence, or one sentence per non-blank line of any other file."""
    sentences: list[str] = []
    for file in files:
        if file.suffix == ".conll":
            sentences.extend(" ".join(s.tokens) for s in read_conll(file))
        else:
            lines = file.read_text(encoding="utf-8").splitlines()
            sentences.extend(line.strip() for line in lines if line.strip())
    return sentences


# --------------------------------------------------------------------- tokenizers


def train_sentencepiece(sentences: Sequence[str], model_file: Path, vocab_size: int) -> Path:
    """A SentencePiece Unigram model, as XLM-R's and mBART's; ``vocab_size`` is an upper bound.

    Not the ``tokenizers`` Unigram trainer, whose result varies by process: SentencePiece on one thread is
    deterministic, and the fast tokenizer classes convert it as they converted the real checkpoints."""
    model_file.parent.mkdir(parents=True, exist_ok=True)
    with model_file.open("wb") as writer:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=writer,
            model_type="unigram",
            vocab_size=vocab_size,
            hard_vocab_limit=False,
            character_coverage=1.0,
            required_chars=_REQUIRED_CHARS,
            num_threads=1,
            minloglevel=2,
        )
    return model_file


def train_xlm_roberta_tokenizer(
    sentences: Sequence[str], out_dir: Path, vocab_size: int = 2000, model_max_length: int = 256
) -> XLMRobertaTokenizerFast:
    """XLM-R tokenizer: ``<s> <pad> </s> <unk>``, the pieces, then ``<mask>``; ``<s> X </s>``."""
    model_file = train_sentencepiece(sentences, out_dir / SPM_FILE, vocab_size)
    return XLMRobertaTokenizerFast(vocab_file=str(model_file), model_max_length=model_max_length)


def train_mbart50_tokenizer(
    sentences: Sequence[str], out_dir: Path, vocab_size: int = 2000, model_max_length: int = 256
) -> MBart50TokenizerFast:
    """mBART-50 tokenizer: the 52 language codes and ``<mask>`` follow the pieces; ``[lang_code] X </s>``."""
    model_file = train_sentencepiece(sentences, out_dir / SPM_FILE, vocab_size)
    # The class has no bos_token argument, but facebook/mbart-large-50 ships one ("<s>").
    return MBart50TokenizerFast(vocab_file=str(model_file), bos_token="<s>", model_max_length=model_max_length)


def train_gpt2_tokenizer(
    sentences: Sequence[str], vocab_size: int = 2000, model_max_length: int = 256
) -> GPT2TokenizerFast:
    """Byte-level BPE with GPT-2's one special token; seeding all 256 byte symbols fixes their ids, so the
    merges are the same in every process."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(sentences, trainer=trainer)
    return GPT2TokenizerFast(
        tokenizer_object=backend,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=model_max_length,
    )


# ------------------------------------------------------------------------- models


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _embedding_rows(tokenizer, spec: dict | None) -> int:
    """The rows of a model's embedding matrix: the tokenizer's size, or the real checkpoint's (paper shape)."""
    return max(len(tokenizer), (spec or {}).get("embedding_rows", 0))


def _special_ids(tokenizer, spec: dict | None = None) -> dict:
    """The special-token ids a model config must agree on with its tokenizer (and the embedding rows)."""
    return {"vocab_size": _embedding_rows(tokenizer, spec), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


def build_xlm_roberta(out_dir: Path, sentences: Sequence[str], seed: int, spec: dict) -> dict:
    """An ``XLMRobertaForMaskedLM`` with pooler weights, as the hub's: flair's ``AutoModel`` then finds every
    weight instead of a random pooler."""
    tokenizer = train_xlm_roberta_tokenizer(sentences, out_dir, spec["vocab_size"], spec["model_max_length"])
    config = XLMRobertaConfig(**_special_ids(tokenizer, spec), **spec["config"])
    torch.manual_seed(seed)
    model = XLMRobertaForMaskedLM(config)
    model.roberta.pooler = XLMRobertaPooler(config)
    model.roberta.pooler.apply(model._init_weights)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model)}


def build_mbart50(out_dir: Path, sentences: Sequence[str], seed: int, spec: dict) -> dict:
    """An ``MBartForConditionalGeneration``; as in facebook/mbart-large-50, decoding starts from ``</s>``."""
    tokenizer = train_mbart50_tokenizer(sentences, out_dir, spec["vocab_size"], spec["model_max_length"])
    config = MBartConfig(**_special_ids(tokenizer, spec), decoder_start_token_id=tokenizer.eos_token_id,
                         forced_eos_token_id=tokenizer.eos_token_id, **spec["config"])
    torch.manual_seed(seed)
    model = MBartForConditionalGeneration(config)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model)}


def build_sbert(out_dir: Path, sentences: Sequence[str], seed: int, spec: dict) -> dict:
    """A SentenceTransformer laid out as the multilingual SBERTs: XLM-R encoder, mean pooling, and distiluse's
    dense projection where the spec has ``dense_features``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = train_xlm_roberta_tokenizer(sentences, Path(tmp), spec["vocab_size"], spec["model_max_length"])
        config = XLMRobertaConfig(**_special_ids(tokenizer, spec), **spec["config"])
        torch.manual_seed(seed)
        XLMRobertaModel(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        encoder = Transformer(tmp, max_seq_length=spec["model_max_length"])
        modules = [encoder, Pooling(encoder.get_embedding_dimension(), pooling_mode="mean")]
        if "dense_features" in spec:
            modules.append(Dense(config.hidden_size, spec["dense_features"], activation_function=torch.nn.Tanh()))
        model = SentenceTransformer(modules=modules, device="cpu")
        model.save(str(out_dir))
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model),
            "dimension": spec.get("dense_features", config.hidden_size)}


def build_gpt2(out_dir: Path, sentences: Sequence[str], seed: int, spec: dict) -> dict:
    tokenizer = train_gpt2_tokenizer(sentences, spec["vocab_size"], spec["model_max_length"])
    config = GPT2Config(
        vocab_size=_embedding_rows(tokenizer, spec),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **spec["config"],
    )
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"vocab_size": len(tokenizer), "parameters": _n_params(model)}


#: The builder of each model folder (a shape's specs say which folders it has).
BUILDERS = {
    "xlm-roberta": build_xlm_roberta,
    "xlm-roberta-base": build_xlm_roberta,
    "mbart-large-50": build_mbart50,
    "sbert": build_sbert,
    "gpt2": build_gpt2,
}


# ----------------------------------------------------------------------- manifest


def _display_path(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def fingerprint(files: Sequence[Path], seed: int, shape: str = "tiny") -> str:
    """Hash of all that decides the output: specs, seed, the text as read, this module's code, library versions."""
    payload = {
        "specs": SHAPES[shape],
        "seed": seed,
        "text": hashlib.sha256(json.dumps(read_sentences(files)).encode()).hexdigest(),
        "code": build_code(),
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentencepiece": spm.__version__,
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def build_code() -> dict[str, str]:
    """This module's digest by syntax tree: editing a comment or docstring rebuilds nothing."""
    from aclm.run.provenance import source_digests

    return source_digests("tools.tiny_models")


def read_manifest(out_dir: str | Path) -> dict | None:
    path = Path(out_dir) / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def is_up_to_date(out_dir: str | Path, files: Sequence[Path], seed: int, shape: str = "tiny") -> bool:
    manifest = read_manifest(out_dir)
    return (
        manifest is not None
        and manifest.get("fingerprint") == fingerprint(files, seed, shape)
        and all((Path(out_dir) / name).is_dir() for name in SHAPES[shape])
    )


def build_tiny_models(
    out_dir: str | Path = DEFAULT_OUT_DIR,
    text_paths: Sequence[str | Path] | None = None,
    seed: int = 0,
    force: bool = False,
    shape: str = "tiny",
) -> tuple[dict, bool]:
    """Build all models of ``shape`` into ``out_dir`` unless the manifest shows the same inputs and code;
    return ``(manifest, rebuilt)``."""
    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r}: one of {sorted(SHAPES)}")
    out_dir = Path(out_dir)
    files = collect_text_files(text_paths or [DEFAULT_TEXT_DIR])
    if not force and is_up_to_date(out_dir, files, seed, shape):
        return read_manifest(out_dir), False

    sentences = read_sentences(files)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)
    built = {}
    for name, spec in SHAPES[shape].items():
        target = out_dir / name
        shutil.rmtree(target, ignore_errors=True)
        sizes = BUILDERS[name](target, sentences, seed, spec)
        sizes["bytes"] = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
        built[name] = {"path": name, "spec": spec, **sizes}

    manifest = {
        "fingerprint": fingerprint(files, seed, shape),
        "code": build_code(),
        "shape": shape,
        "seed": seed,
        "text_files": [_display_path(f) for f in files],
        "sentences": len(sentences),
        "models": built,
        "versions": {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "sentencepiece": spm.__version__,
            "torch": torch.__version__,
        },
    }
    (out_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest, True
