"""Every script answers --help with its usage and exits, starting nothing (the demo once trained for 14 minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT

SCRIPTS = sorted((PROJECT_ROOT / "scripts").glob("*.py"))


def test_no_script_shadows_a_module_the_scripts_import():
    """A script's folder comes first on its sys.path: scripts/tabulate.py once replaced the tabulate package."""
    import importlib.util

    shadowed = [s.name for s in SCRIPTS if importlib.util.find_spec(s.stem) is not None]
    assert shadowed == []


@pytest.fixture(scope="module")
def helps(tmp_path_factory) -> dict[str, tuple[subprocess.Popen, Path]]:
    """Every script's ``--help``, started at once (each spends seconds importing), each in an empty folder."""
    started = {}
    for script in SCRIPTS:
        folder = tmp_path_factory.mktemp(script.stem)
        started[script.stem] = (subprocess.Popen([sys.executable, str(script), "--help"], cwd=folder, text=True,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE), folder)
    yield started
    for proc, _ in started.values():
        proc.kill()


@pytest.mark.parametrize("script", [s.stem for s in SCRIPTS])
def test_help_prints_the_usage_and_exits(script, helps):
    proc, folder = helps[script]
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    assert stdout.startswith("usage:"), stdout[:500]
    assert list(folder.iterdir()) == [], "--help must not write anything"
