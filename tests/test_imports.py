"""No import cycles and no import of a higher layer: import-linter's contracts in pyproject.toml.

``lint-imports`` reads the imports from the source, those inside functions too: a deferred import hides a
dependency from Python, not from the reader.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CYCLES, ACLM_LAYERS, ALL_LAYERS = ("No import cycles, at any depth of a package", "The layers of aclm",
                                   "The other methods and the programs among aclm's layers")

#: A tree with every layer the contracts name, and nothing that breaks them.
SKELETON = {**{f"aclm/{p}/__init__.py": "" for p in
               ("base", "steps", "engine", "stages", "run", "experiments", "tables")},
            "aclm/__init__.py": "", "baselines/__init__.py": "", "melm/__init__.py": "", "tools/__init__.py": "",
            "scripts/run.py": "import aclm.tables\n"}


def lint_imports(tree: Path) -> tuple[set[str], str]:
    """The project's contracts that the modules under ``tree`` break, and lint-imports' report."""
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
                            cwd=tree, capture_output=True, text=True)
    report = result.stdout + result.stderr
    broken = set(re.findall(r"^(.+) BROKEN$", report, re.MULTILINE))
    assert result.returncode == (1 if broken else 0), report        # 1 for broken contracts, not an error
    assert broken or "3 kept, 0 broken" in report, report
    return broken, report


def test_the_project_keeps_its_import_contracts():
    broken, report = lint_imports(ROOT)
    assert not broken, report


@pytest.mark.parametrize("files,broken,said", [
    ({}, set(), ""),
    ({"aclm/run/chain.py": "", "aclm/steps/keywords.py": "def pick():\n    from aclm.run import chain\n"},
     {ACLM_LAYERS, ALL_LAYERS}, "aclm.steps.keywords -> aclm.run.chain (l.2)"),        # upward, in a function
    ({"aclm/base/config.py": "def validate():\n    from aclm.base.datasets import registry\n",
      "aclm/base/datasets.py": "from aclm.base.config import CONFIG_DIR\n"},            # config <-> datasets
     {CYCLES}, "No cycles are allowed in aclm.base."),
    ({"aclm/engine/memory.py": "", "baselines/daga.py": "from aclm.engine import memory\n"},
     {ALL_LAYERS}, "baselines is not allowed to import aclm.engine"),
    ({"melm/sources.py": "import baselines\n"}, {ALL_LAYERS}, "melm is not allowed to import baselines"),
    ({"aclm/tables/report.py": "import scripts.run\n"}, {ALL_LAYERS},
     "aclm.tables is not allowed to import scripts"),
    ({"aclm/extra/__init__.py": ""}, {ACLM_LAYERS}, "- aclm.extra"),                      # in no layer
])
def test_lint_imports_sees_what_breaks_a_contract(tmp_path, files, broken, said):
    for name, text in {**SKELETON, **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found, report = lint_imports(tmp_path)
    assert found == broken and said in report, report
