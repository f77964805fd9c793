"""The demo says how long it expects to take before it starts."""

from __future__ import annotations

import importlib.util

import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.run.chain import run_method
from aclm.run.estimates import duration
from aclm.run.naming import run_config
from conftest import FAST


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("demo", PROJECT_ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_expected_time_comes_from_the_stages_recorded_times(demo, tiny_models, tmp_path):
    overrides = [*FAST, f"run_dir={tmp_path}"]
    assert demo.expected(overrides).startswith("no estimate yet for the rest (data, ")    # tiny: none measured
    # the runs as the demo starts them: folders named after the overrides (seed1@ner.epochs=2/)
    done = {**run_method(run_config([*overrides, "method=gold_only"])),
            **run_method(run_config([*overrides, "method=aclm"]))}
    assert demo.expected(overrides) == "nothing to run: every stage is current"
    from aclm.engine import stamp

    recorded = sum(stamp(path)["seconds"] for name, path in done.items() if name != "data")
    line = demo.expected([*overrides, "seed=2"])   # another seed: every stage but the data's again
    assert line.startswith(f"the rest takes up to about {duration(recorded)} (")
