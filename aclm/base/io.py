"""Atomic file writes and content hashes.

A run can be killed at any moment, so every artifact is written to a temporary name and renamed into
place: a file that exists is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def user_mode(directory: bool) -> int:
    """The mode a plain ``open``/``mkdir`` would give: ``tempfile``'s private 0600/0700 would hide runs
    from a group sharing a disk."""
    return (0o777 if directory else 0o666) & ~_umask()


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, user_mode(directory=False))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in split_lines(Path(path).read_text(encoding="utf-8")) if line]


def split_lines(text: str) -> list[str]:
    """``text`` cut at ``\\n`` (and ``\\r\\n``) only: ``str.splitlines`` also cuts at U+2028, U+0085 etc.,
    which a CoNLL token or a JSON string may hold."""
    lines = text.split("\n")
    if lines[-1] == "":     # the last line's own end
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a scratch directory that replaces ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, user_mode(directory=True))
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_path(path: str | Path) -> str:
    """Hash of a file, or of a directory's files (names and contents, sorted)."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


_SMALL = 1 << 20            # files below this are hashed at every first look; larger ones once per version
_KNOWN: dict[str, str] = {}


def _digest_store() -> Path:
    """Where large files' digests are kept: ``$ACLM_CACHE/digests``, else ``~/.cache/aclm/digests``."""
    return Path(os.environ.get("ACLM_CACHE") or Path.home() / ".cache" / "aclm") / "digests"


def file_digest(path: Path) -> str:
    """sha256 of a file, cached (large files also on disk) by device, inode, size, mtime and ctime (which
    cannot be set back by hand); a file changed in the last 2 s is rehashed (one clock tick keeps times)."""
    st = os.stat(path)
    settled = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > 2 * 10**9
    key = f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}-{st.st_ctime_ns}"
    kept = _digest_store() / key[-2:] / key
    if settled and key not in _KNOWN and st.st_size >= _SMALL and kept.is_file():
        _KNOWN[key] = kept.read_text()
    if settled and key in _KNOWN:
        return _KNOWN[key]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    if settled:
        _KNOWN[key] = h.hexdigest()
        if st.st_size >= _SMALL:
            try:
                atomic_write_text(kept, h.hexdigest())
            except OSError:             # a read-only or full cache: hash again next time
                pass
    return h.hexdigest()
