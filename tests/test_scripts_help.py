"""Every script answers --help with its usage and exits, starting nothing (the demo once trained for 14 minutes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aclm.base.paths import PROJECT_ROOT

SCRIPTS = sorted((PROJECT_ROOT / "scripts").glob("*.py"))


def test_no_script_shadows_a_module_the_scripts_import():
    """A script's folder comes first on its sys.path: scripts/tabulate.py once replaced the tabulate package."""
    import importlib.util

    shadowed = [s.name for s in SCRIPTS if importlib.util.find_spec(s.stem) is not None]
    assert shadowed == []


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_help_prints_the_usage_and_exits(script, tmp_path):
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:"), proc.stdout[:500]
    assert list(tmp_path.iterdir()) == [], "--help must not write anything"
