"""Which code made a result: the modules a stage computes with, and the checkout it ran from.

A stage's code is its module, every project module that imports (anywhere, at any depth) and every package they
sit in (an import runs its packages' ``__init__.py``), each digested by its syntax tree without docstrings,
comments, layout and statements that only log.  Left out whole (:data:`NO_RESULT`) are the modules that decide
how a run is driven, cached, shown or tabulated, never what it computes.  Code reached by name only (a method
table entry's function) is named by the stage (``code=``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import platform
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

from aclm.base.paths import PROJECT_ROOT
from aclm.base.runtime import library_versions

PACKAGES = ("aclm", "baselines", "melm")
NO_RESULT = ("aclm.engine", "aclm.stages.declare", "aclm.base.config", "aclm.base.registry", "aclm.base.logs",
             "aclm.base.signals", "aclm.base.progress", "aclm.base.tensorboard", "aclm.run", "aclm.experiments",
             "aclm.tables")
#: Calls whose statement is left out of a digest: they report, they compute nothing a stage writes.
REPORTING = {"log", "logger", "logging", "warnings"}
#: About when this process loaded the project's code: a module file changed after it may not be what runs.
LOADED_NS = time.time_ns()


def counts(module: str) -> bool:
    """Whether ``module`` is project code that can change a result."""
    return module.split(".")[0] in PACKAGES and not any(module == m or module.startswith(m + ".")
                                                        for m in NO_RESULT)


@lru_cache(maxsize=None)
def _package_dir(top: str) -> Path | None:
    spec = importlib.util.find_spec(top)       # imports the top-level package only, never a training library
    return Path(spec.origin).parent if spec and spec.origin else None


def source_file(module: str) -> Path | None:
    """The file of module ``module`` of the project (or tools/), found without importing it (None: none)."""
    top, _, rest = module.partition(".")
    base = _package_dir(top) if top in (*PACKAGES, "tools") else None
    if base is None:
        return None
    stem = base.joinpath(*rest.split(".")) if rest else base
    return next((p for p in (stem.with_suffix(".py"), stem / "__init__.py") if p.is_file()), None)


def _reports(node: ast.AST) -> bool:
    call = node.value if isinstance(node, ast.Expr) else None
    target = call.func.value if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
    return isinstance(target, ast.Name) and target.id in REPORTING


def tree_digest(source: str, reports: bool = False) -> str:
    """The digest of ``source``'s syntax tree without docstrings and (unless ``reports``) reporting statements."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body:
            continue
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        node.body = [n for n in body if reports or not _reports(n)] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def module_source(module: str) -> str:
    return source_file(module).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _facts(module: str, mtime_ns: int) -> tuple[str, frozenset[str]]:
    """A module's digest and the modules it imports anywhere, with the packages they sit in."""
    path, source = source_file(module), module_source(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = {package} if package else set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            found.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
    prefixes = {".".join(m.split(".")[:n]) for m in found for n in range(1, m.count(".") + 2)}
    return tree_digest(source), frozenset(m for m in prefixes - {module} if source_file(m) is not None)


#: Each module's digest as this process first read it, with the file's modification time then.
_FIRST_READ: dict[str, tuple[int, str]] = {}


def module_digest(module: str) -> tuple[str, frozenset[str]]:
    mtime = source_file(module).stat().st_mtime_ns
    facts = _facts(module, mtime)
    _FIRST_READ.setdefault(module, (mtime, facts[0]))
    return facts


def code_digests(modules: Iterable[str]) -> dict[str, str]:
    """The digest of each module of ``modules`` and of every module and package they reach that counts."""
    named, digests = set(modules), {}
    todo = list(named)
    while todo:
        module = todo.pop()
        if module in digests or not (module in named or counts(module)) or source_file(module) is None:
            continue
        digests[module], imports = module_digest(module)
        todo.extend(imports)
    return dict(sorted(digests.items()))


def changed_code(code: Mapping[str, str]) -> list[str]:
    """The modules of ``code`` (digests a stamp recorded) whose code now differs or is gone; read from the
    files, never imported, so checking a finished run loads no training library."""
    return [m for m, digest in code.items() if source_file(m) is None or module_digest(m)[0] != digest]


def edited_while_running(code: Mapping[str, str]) -> list[str]:
    """The files of ``code``'s modules that this process imported and whose code changed on disk since it
    loaded them: the code that ran is then not the code the digests name."""
    edited = []
    for module in sorted(code):
        path = source_file(module) if module in sys.modules else None
        if path is None or path.stat().st_mtime_ns <= LOADED_NS:
            continue
        first = _FIRST_READ.get(module)
        if first and first[0] <= LOADED_NS and first[1] == module_digest(module)[0]:
            continue
        edited.append(str(path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path))
    return edited


def _git(*args: str) -> str | None:
    """git's answer, taking no lock: a signal arriving mid-call never leaves ``.git/index.lock`` behind."""
    try:
        done = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, timeout=20,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def hardware() -> dict:
    """The machine a stage ran on: CPU model and cores, and the GPU where this process has used CUDA by now."""
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines() if line.startswith("model name")),
               platform.machine())
    torch = sys.modules.get("torch")                 # never imported here: a stage that used no torch used no GPU
    gpu = torch.cuda.get_device_name() if torch is not None and torch.cuda.is_initialized() else None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "system": platform.platform()}


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


@lru_cache(maxsize=1)
def checkout() -> dict:
    """Commit, dirty flag and diff digest, package path, command, Python and library versions."""
    import aclm

    commit = _git("rev-parse", "HEAD")
    record: dict = {"commit": commit.strip() if commit else None, "package": str(Path(aclm.__file__).parent),
                    "python_executable": sys.executable, "dirty": None}      # None: an installed copy, no git
    if commit:
        status = _git("status", "--porcelain", "--untracked-files=normal") or ""
        record["dirty"] = bool(status.strip())
        if record["dirty"]:
            diff = (_git("diff", "HEAD", "--binary") or "") + status
            record["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    script = Path(sys.argv[0]).resolve() if sys.argv[0] not in ("", "-c") else None
    shown = str(script.relative_to(PROJECT_ROOT)) if script and script.is_relative_to(PROJECT_ROOT) else sys.argv[0]
    record["command"] = " ".join(["python", shown or "", *sys.argv[1:]])
    record["versions"] = library_versions()
    return record
