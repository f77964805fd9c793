"""Which code made a result: the source a stage's builder depends on, and the checkout it ran from.

**A stage's code.**  :func:`code_digests` follows a builder function to the
project modules it uses: the names its body refers to (a function or class
of another project module brings in that whole module; a function of the
builder's own module is followed function by function, since one module of
:mod:`aclm.run` declares several stages), the modules it imports inside its
body, and then every project module those import, at any depth.  Each is
digested by its syntax tree without docstrings, so editing a comment, a
docstring or the layout re-runs nothing, and any other edit re-runs the
stages that use the code and every stage after them.  The stage machinery
itself (:data:`MACHINERY`: fingerprints, stamps, locks) computes no output
and is left out.

**The checkout.**  :func:`checkout` records the git commit, whether the tree
had uncommitted changes (and a digest of them), where the imported package
lives and the library versions: a virtual environment holding another
checkout's editable install shows up as a package path outside this one.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import subprocess
import sys
import textwrap
import time
import types
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping

from aclm.base.paths import PROJECT_ROOT
from aclm.base.runtime import library_versions

#: The project's top-level packages: only their modules count as a stage's code.
PACKAGES = ("aclm", "baselines", "melm")
#: Modules that decide whether a stage runs, not what it computes.
MACHINERY = frozenset({"aclm.run.stages", "aclm.run.provenance", "aclm.run.locks"})
#: About when this process loaded the project's code (the stage machinery comes with the first run or plan):
#: a module file changed after it may no longer be the code this process runs.
LOADED_NS = time.time_ns()


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PACKAGES and module not in MACHINERY


def _tree_digest(source: str) -> str:
    """The digest of ``source``'s syntax tree with docstrings removed (comments and layout never reach it)."""
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


@lru_cache(maxsize=None)
def _package_dir(top: str) -> Path | None:
    spec = importlib.util.find_spec(top)       # imports the top-level package only, never a training library
    return Path(spec.origin).parent if spec and spec.origin else None


def _source_file(name: str) -> Path | None:
    """The file of project module ``name``, found without importing it (None: not a module)."""
    top, _, rest = name.partition(".")
    base = _package_dir(top)
    if base is None:
        return None
    stem = base.joinpath(*rest.split(".")) if rest else base
    for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_file(name: str) -> Path:
    found = _source_file(name)
    if found is None:
        raise ImportError(f"no source for module {name}")
    return found


@lru_cache(maxsize=None)
def _module_facts(name: str, mtime_ns: int) -> tuple[str, frozenset[str]]:
    """A module's digest and the project modules it imports anywhere (top level or inside functions)."""
    source = _module_file(name).read_text(encoding="utf-8")
    return _tree_digest(source), frozenset(_imported(ast.parse(source), _package_of(name)))


def _package_of(name: str) -> str:
    return name if _module_file(name).name == "__init__.py" else name.rpartition(".")[0]


def _imported(tree: ast.AST, package: str) -> Iterable[str]:
    """Project modules named by the import statements of ``tree`` (``from a import b`` counts b if a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if _is_project(name) and _source_file(name) is not None:
                yield name


#: Each project module's digest as this process first read it, with the file's modification time then.
_FIRST_READ: dict[str, tuple[int, str]] = {}


def _module_digest(name: str) -> tuple[str, frozenset[str]]:
    mtime = _module_file(name).stat().st_mtime_ns
    facts = _module_facts(name, mtime)
    _FIRST_READ.setdefault(name, (mtime, facts[0]))
    return facts


def _function_key(fn: Callable) -> str:
    """How digests name a function: ``module:qualname`` (:func:`_digest_now` reads it back)."""
    return f"{fn.__module__}:{fn.__qualname__}"


def _function_source(fn: Callable) -> str:
    return inspect.getsource(fn)


def _referenced(fn: types.FunctionType) -> tuple[set[str], list[types.FunctionType]]:
    """The project modules ``fn`` uses directly, and the functions of its own module it calls."""
    names: set[str] = set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    values = [fn.__globals__[n] for n in names if n in fn.__globals__]
    values += [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
    values = [inspect.unwrap(v) if callable(v) else v for v in values]     # an lru_cache'd function is its code
    modules = set(_imported(ast.parse(textwrap.dedent(_function_source(fn))), fn.__module__.rpartition(".")[0]))
    local: list[types.FunctionType] = []
    for value in values:
        if isinstance(value, types.ModuleType):
            owner = value.__name__
        elif isinstance(value, (types.FunctionType, type)):
            owner = value.__module__
        else:
            owner = type(value).__module__
        if not _is_project(owner or ""):
            continue
        if isinstance(value, types.FunctionType) and owner == fn.__module__:
            local.append(value)
        else:
            modules.add(owner)
    return modules, local


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:      # a cell not assigned yet
        return False
    return True


def code_digests(build: Callable, modules: Iterable[str] = ()) -> dict[str, str]:
    """Digest per piece of code ``build`` depends on: ``module:function`` for functions of its own module,
    ``module`` for every project module it reaches; ``modules`` are added (code it reaches by name only,
    e.g. a method's ``augment`` function named in the method table)."""
    build = inspect.unwrap(build)
    digests: dict[str, str] = {}
    pending_modules = set(modules)
    pending_functions = [build]
    while pending_functions:
        fn = pending_functions.pop()
        key = _function_key(fn)
        if key in digests:
            continue
        digests[key] = _tree_digest(_function_source(fn))
        found, local = _referenced(fn)
        pending_modules |= found
        pending_functions.extend(local)
    while pending_modules:
        name = pending_modules.pop()
        if name in digests or not _is_project(name):
            continue
        digests[name], imports = _module_digest(name)
        pending_modules |= imports - digests.keys()
    for module in {key.partition(":")[0] for key in digests}:
        if _is_project(module):     # the builder's own module too, read whole once (edited_while_running)
            _module_digest(module)
    return dict(sorted(digests.items()))


def source_digests(*code: str | Callable) -> dict[str, str]:
    """The digest of each module (named) or function, by syntax tree without docstrings, as for a stage's code:
    the code identity of a build that is no stage (the models tools/ builds), whose code is listed by hand."""
    digests = {}
    for item in code:
        if isinstance(item, str):
            digests[item] = _module_digest(item)[0]
        else:
            fn = inspect.unwrap(item)
            digests[_function_key(fn)] = _tree_digest(_function_source(fn))
    return dict(sorted(digests.items()))


def changed_code(code: Mapping[str, str]) -> list[str]:
    """The keys of ``code`` (the digests a stamp recorded) whose code now differs or is gone: a result made by
    them is not what the code of this checkout makes.  Read from the files, never imported, so checking a
    finished run loads no training library."""
    return [key for key, digest in code.items() if _digest_now(key) != digest]


def _digest_now(key: str) -> str | None:
    """The digest of ``module`` or ``module:function`` as the file now reads (None: no longer there)."""
    module, _, qualname = key.partition(":")
    path = _source_file(module) if _is_project(module) else None
    if path is None:
        return None
    if not qualname:
        return _module_digest(module)[0]
    return _function_digest(path, path.stat().st_mtime_ns, qualname)


@lru_cache(maxsize=None)
def _function_digest(path: Path, mtime_ns: int, qualname: str) -> str | None:
    """The digest of function ``qualname`` of the file at ``path`` as :func:`code_digests` takes it (None: gone);
    cached per modification time, as a table of many runs asks for the same functions again and again."""
    source = path.read_text(encoding="utf-8")
    node, inside = ast.parse(source), False
    for name in qualname.split("."):
        if name == "<locals>":            # a function defined in the body of the one before
            inside = True
            continue
        candidates = (n for n in ast.walk(node) if n is not node) if inside else iter(node.body)
        node = next((n for n in candidates if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == name), None)
        if node is None:
            return None
        inside = False
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])   # as inspect.getsource starts
    return _tree_digest("".join(source.splitlines(keepends=True)[start - 1:node.end_lineno]))


def edited_while_running(code: Mapping[str, str]) -> list[str]:
    """The files of the modules in ``code`` (a stage's digests, taken from the files on disk) that this
    process has imported and whose code changed on disk since it loaded the project: the code that ran is then
    not the code the digests name, and a stamp would pass one for the other.  A file whose only changes are
    comments, docstrings or layout is not one, when this process read it before the change."""
    edited = []
    for name in sorted({key.partition(":")[0] for key in code}):
        path = _source_file(name) if name in sys.modules and _is_project(name) else None
        if path is None or path.stat().st_mtime_ns <= LOADED_NS:
            continue
        first = _FIRST_READ.get(name)
        if first and first[0] <= LOADED_NS and first[1] == _module_digest(name)[0]:
            continue
        edited.append(str(path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path))
    return edited


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


@lru_cache(maxsize=1)
def checkout() -> dict:
    """Commit, dirty flag (and the uncommitted diff's digest), package path, Python and library versions."""
    import aclm

    commit = _git("rev-parse", "HEAD")
    record: dict = {"commit": commit.strip() if commit else None, "package": str(Path(aclm.__file__).parent),
                    "python_executable": sys.executable}
    if commit:
        status = _git("status", "--porcelain", "--untracked-files=normal") or ""
        record["dirty"] = bool(status.strip())
        if record["dirty"]:
            diff = (_git("diff", "HEAD", "--binary") or "") + status
            record["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    else:
        record["dirty"] = None          # not a git checkout: an installed copy
    record["versions"] = library_versions()
    return record
