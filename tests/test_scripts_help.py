"""Every script answers --help with its usage and exits, starting nothing (the demo once trained for 14 minutes)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow


#: the stage scripts and user tools (scripts/), and the measurement and model-building tools (tools/)
SCRIPTS = sorted([*(PROJECT_ROOT / "scripts").glob("*.py"),
                  *(p for p in (PROJECT_ROOT / "tools").glob("*.py") if '__name__ == "__main__"' in p.read_text())])


def test_no_script_shadows_a_module_the_scripts_import():
    """A script's folder comes first on its sys.path: scripts/tabulate.py once replaced the tabulate package."""
    import importlib.util

    modules = [*SCRIPTS, *(PROJECT_ROOT / "tools").glob("*.py")]
    shadowed = [s.name for s in modules if s.stem != "__init__" and importlib.util.find_spec(s.stem) is not None]
    assert shadowed == []


#: --help calls run at once: each spends seconds importing torch, and each holds a few hundred MB meanwhile
AT_ONCE = 4


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
    """Every script's ``--help``, :data:`AT_ONCE` at a time, each in an empty folder: script -> (future, folder)."""
    def run(script: Path, folder: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), "--help"], cwd=folder, capture_output=True, text=True,
                              timeout=120)

    with ThreadPoolExecutor(AT_ONCE) as pool:
        folders = {script.stem: tmp_path_factory.mktemp(script.stem) for script in SCRIPTS}
        yield {script.stem: (pool.submit(run, script, folders[script.stem]), folders[script.stem])
               for script in SCRIPTS}


@pytest.mark.parametrize("script", [s.stem for s in SCRIPTS])
def test_help_prints_the_usage_and_exits(script, helps):
    future, folder = helps[script]
    proc = future.result()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:"), proc.stdout[:500]
    assert list(folder.iterdir()) == [], "--help must not write anything"
