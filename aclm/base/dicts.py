"""Plain values from configs: nested dicts, dotted keys, and a stable short hash of them."""

from __future__ import annotations

import json
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from aclm.base.io import sha256_text


def flatten(node: dict, prefix: str = "") -> dict[str, Any]:
    """A nested config (plain dicts) as dotted keys and their values; an empty section is a value ({})."""
    flat: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def to_dict(obj: Any) -> Any:
    """Plain Python values (for JSON) from configs, possibly nested in dicts and lists."""
    if isinstance(obj, (DictConfig, ListConfig)):
        return OmegaConf.to_container(obj, resolve=True)
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def config_hash(*parts: Any) -> str:
    """Stable short hash of config sections (and any other JSON-able values)."""
    payload = json.dumps([to_dict(p) for p in parts], sort_keys=True, default=str)
    return sha256_text(payload)[:16]
