"""An offline node with a filled Hugging Face cache: no stage asks the hub, whatever the environment says.

transformers 4.57 asks the hub (``model_info``) about any tokenizer over 100k pieces loaded by name, even with
``local_files_only``; XLM-R's and mBART-50's have 250k.  Here the network is cut inside the subprocesses (a
``sitecustomize`` that refuses every connection and records the attempt), ``HF_HUB_OFFLINE`` is unset, and
the cache holds ``xlm-roberta-large`` as the tiny model on the real vocabulary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow

HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE", "HF_HOME",
                 "TRANSFORMERS_CACHE", "HF_ENDPOINT")
COMMIT = "0123456789abcdef0123456789abcdef01234567"

NO_NETWORK = '''
import os, socket
def _refuse(*args, **kwargs):
    with open(os.environ["NETWORK_ATTEMPTS"], "a") as log:
        log.write(repr(args[1:2]) + "\\n")
    raise OSError("network blocked by the test")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.getaddrinfo = _refuse
socket.create_connection = _refuse
'''


@pytest.fixture
def offline(real_vocab, tmp_path):
    """Environment of a node without network: sockets refused, ``xlm-roberta-large`` in the cache."""
    snapshot = tmp_path / "hub" / "models--xlm-roberta-large" / "snapshots" / COMMIT
    shutil.copytree(real_vocab / "xlm-roberta", snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(COMMIT)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_NETWORK)
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARIABLES}
    return {**env, "HF_HUB_CACHE": str(tmp_path / "hub"), "NETWORK_ATTEMPTS": str(tmp_path / "attempts.log"),
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PROJECT_ROOT)])}


def attempts(env) -> str:
    path = Path(env["NETWORK_ATTEMPTS"])
    return path.read_text() if path.exists() else ""


def python(env, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_loaded_by_name_the_250k_tokenizer_asks_the_hub_and_fails(offline):
    """Why :func:`aclm.base.models.load_path` exists (this test fails once transformers stops asking)."""
    proc = python(offline, "-c", "from transformers import AutoTokenizer; "
                                 "AutoTokenizer.from_pretrained('xlm-roberta-large', local_files_only=True)")
    assert proc.returncode != 0 and attempts(offline)


def test_a_cached_model_loads_from_its_snapshot_without_a_connection(offline):
    proc = python(offline, "-c", "from transformers import AutoTokenizer; from aclm.base.models import load_path; "
                                 "print(load_path('xlm-roberta-large')); "
                                 "print(len(AutoTokenizer.from_pretrained(load_path('xlm-roberta-large'))))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [str(Path(offline["HF_HUB_CACHE"]) / "models--xlm-roberta-large" / "snapshots"
                                       / COMMIT), "250002"]
    assert attempts(offline) == ""


def test_the_data_check_and_a_gold_only_run_never_connect(offline, tmp_path):
    setting = ["profile=tiny", "ner.model=xlm-roberta-large", "ner.epochs=1", f"run_dir={tmp_path / 'runs'}"]
    check = python(offline, "scripts/check_data.py", *setting)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-3000:]
    assert "not checked" not in check.stdout + check.stderr          # the lengths were checked on its tokenizer
    run = python(offline, "scripts/run_method.py", "method=gold_only", *setting)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert attempts(offline) == ""


def test_a_model_neither_cached_nor_reachable_is_named_before_any_training(offline, tmp_path):
    setting = ["profile=tiny", "ner.model=xlm-roberta-base", f"run_dir={tmp_path / 'runs'}"]
    proc = python(offline, "scripts/run_method.py", "method=gold_only", *setting)
    assert proc.returncode != 0
    named = [line for line in (proc.stdout + proc.stderr).splitlines() if "xlm-roberta-base" in line]
    assert any("not a local folder" in line and "unreachable" in line for line in named), proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("_stage.json"))
