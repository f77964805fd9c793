"""Grids on Slurm: the arrays a slice becomes, and a Table 1 slice on a real single-node Slurm.

The real cluster is started from Debian's packages (slurm-wlm, munge) in a
temporary folder, on free localhost ports, as the current user; the test is
skipped where slurmctld, slurmd or munged are not installed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from aclm.base.paths import PROJECT_ROOT
from aclm.experiments.grid import Cell, expand, load_grid
from aclm.experiments.slurm import CLUSTER_FILE, Places, id_ranges, load_cluster, plan, plan_jobs, run_label

pytestmark = pytest.mark.slurm


DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
SLICE = ["PROFILE=smoke", "LANGS=en", "SIZES=100", "SEEDS=1", "METHODS=gold_only,lwtr,aclm"]
TEST_CLUSTER = """cluster:
  phases:
    s1: {gpus: 0, cpus: 1, mem: 100M, time: "00:30:00"}
    methods: {gpus: 0, cpus: 1, mem: 100M, time: "00:30:00"}
    wikineural: {gpus: 0, cpus: 1, mem: 100M, time: "00:30:00"}
    aggregate: {gpus: 0, cpus: 1, mem: 100M, time: "00:30:00"}
"""


@pytest.fixture
def arrays_of(monkeypatch):
    """plan() with the runs of the methods in ``done`` taken as finished, and no other."""
    def arrays(cells, done=()):
        monkeypatch.setattr(Cell, "is_done", lambda cell: cell.method in done)
        return plan(cells, "t")

    return arrays


# --- planning (no Slurm needed) ---------------------------------------------------------------

def test_id_ranges_compress_sorted_task_ids():
    assert id_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert id_ranges([3]) == "3"


def test_full_table1_is_one_s1_array_then_one_array_per_method_chained_by_setting(arrays_of):
    cells = expand(load_grid("table1"), "paper")
    arrays, done = arrays_of(cells)
    assert done == 0 and [a.name for a in arrays] == [
        "t.gold_only", "t.lwtr.after-gold_only", "t.daga.after-gold_only", "t.melm.after-gold_only",
        "t.aclm_only_entity.after-gold_only", "t.aclm_random.after-gold_only", "t.aclm.after-gold_only"]
    s1 = arrays[0]
    assert sorted(s1.tasks) == list(range(120)) and s1.after is None
    for array in arrays[1:]:                 # task i of every array is setting i: aftercorr pairs them
        assert array.after is s1 and all(c.layout.root == s1.tasks[i].layout.root for i, c in array.tasks.items())


def test_wikineural_waits_for_aclm_of_its_own_setting(arrays_of):
    arrays, _ = arrays_of(expand(load_grid("table4"), "paper", methods="wikineural,aclm"))
    by_name = {a.label: a for a in arrays}
    wiki, aclm = by_name["wikineural"], by_name["aclm"]
    assert wiki.phase == 2 and wiki.after is aclm and aclm.after is by_name["gold_only"]
    assert all(wiki.tasks[i].layout.root == aclm.tasks[i].layout.root for i in wiki.tasks)


def test_runs_whose_s1_is_done_wait_for_nothing(arrays_of):
    cells = expand(load_grid("table1"), "paper", langs="en", sizes="100")
    arrays, done = arrays_of(cells, done=("gold_only", "lwtr"))
    assert done == 3 + 3
    assert [(a.name, a.after) for a in arrays] == [("t.daga", None), ("t.melm", None), ("t.aclm_only_entity", None),
                                                     ("t.aclm_random", None), ("t.aclm", None)]


def test_dry_run_scripts_exec_the_run_and_log_it_under_its_name(arrays_of, tmp_path):
    cells = expand(load_grid("table1"), "paper", langs="en", sizes="100", seeds="1", methods="gold_only,aclm")
    arrays, _ = arrays_of(cells)
    places = Places.of("runs", "paper", "t", tmp_path)
    cluster = load_cluster(partition="gpu")
    jobs = plan_jobs(arrays, "table1", cluster, places, "python", ["profile=paper"])
    s1, aclm, table = (j.script for j in jobs)
    assert "#SBATCH --array=0\n" in s1 and "#SBATCH --gres=gpu:1\n" in s1 and "--partition=gpu" in s1
    assert "#SBATCH --dependency=aftercorr:<t.gold_only>\n#SBATCH --kill-on-invalid-dep=yes" in aclm
    assert f'exec python {PROJECT_ROOT}/scripts/grid.py cell "$@"' in aclm
    assert f"--output={places.submission}/tasks/t.aclm.after-gold_only/%a" in aclm
    assert run_label(arrays[1].tasks[0]) == "multiconer-en-gold100-seed1-aclm"
    assert "#SBATCH --gres" not in table and "afterany:<t.gold_only>:<t.aclm.after-gold_only>" in table
    assert not tmp_path.joinpath("runs").exists()              # planning writes nothing


def test_gpu_shards_place_several_runs_on_one_gpu(tmp_path):
    import yaml

    from aclm.experiments.slurm import SlurmError

    raw = yaml.safe_load(CLUSTER_FILE.read_text())
    shared = tmp_path / "shards.yaml"
    shared.write_text(yaml.safe_dump({"cluster": {**raw["cluster"], "gpu_gres": "shard"}}))
    cluster = load_cluster(shared)
    assert "--gres=shard:1" in cluster.options("methods") and not any("gpu:" in o for o in cluster.options("s1"))
    assert not any(o.startswith("--gres") for o in cluster.options("aggregate"))      # no GPU, no shard
    shared.write_text(yaml.safe_dump({"cluster": {**raw["cluster"], "gpu_gres": "mps"}}))
    with pytest.raises(SlurmError, match="gpu_gres is gpu or shard"):
        load_cluster(shared)


# --- a real Slurm ----------------------------------------------------------------------------

def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def slurm_conf(root: Path, user: str) -> str:
    host = socket.gethostname().split(".")[0]
    ctld, slurmd = free_ports(2)
    return f"""ClusterName=aclmtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ctld}
SlurmdPort={slurmd}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
MailProg=/bin/true
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=30
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def wait_for(check, timeout: float, what: str, interval: float = 0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A single-node Slurm (munged, slurmctld, slurmd) in a temporary folder; yields the clients' environment."""
    missing = [d for d in DAEMONS if not shutil.which(d)]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} not found; apt-get install slurm-wlm munge)")
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool"):
        (root / sub).mkdir(mode=0o711)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, getpass.getuser()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    munge = root / "munge"
    daemons = [subprocess.Popen(["munged", "--foreground", "--force", f"--socket={munge}/munge.socket",
                                 f"--key-file={key}", f"--pid-file={munge}/munged.pid",
                                 f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_for((munge / "munge.socket").exists, 30, "munged's socket")
        for daemon in ("slurmctld", "slurmd"):
            daemons.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        idle = lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                                text=True).stdout
        wait_for(idle, 60, f"an idle node (see {root}/slurmctld.log, {root}/slurmd.log)")
        yield env
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
            daemon.wait(timeout=30)


def make(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)


def queue(env: dict) -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i %T %j"], env=env, capture_output=True, text=True).stdout.split("\n")[:-1]


def job_state(job: str, env: dict) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
    return next(w.split("=", 1)[1] for w in shown.split() if w.startswith("JobState="))


def scratch(folder: Path) -> list[Path]:
    return [p for p in folder.glob(".*.tmp") if p.is_dir()] if folder.exists() else []


def without_runtimes(table: str) -> str:
    """A table less its runtime note: wall minutes are the one thing two runs of the same code do not share."""
    return "\n".join(line for line in table.splitlines() if "Runtime: " not in line)


def test_table1_slice_on_slurm_equals_makes_and_completes_after_scancel(slurm, shared_data, tiny_models, tmp_path):
    """Submitted, one run cancelled midway, submitted again: the table is complete and equals make's.

    make then runs the methods again in the same run folder, with the Slurm
    runs moved aside and their S0 and S1 copied back (a stage's fingerprint
    names its inputs' paths), so that S1 is not trained twice.
    """
    env = {**slurm, "ACLM_DATA_DIR": str(shared_data), "OMP_NUM_THREADS": "1"}
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(TEST_CLUSTER)
    runs, results = tmp_path / "runs", tmp_path / "slurm-results"
    submit = ["submit-table1", *SLICE, f"RUNS={runs}", f"RESULTS={results}", f"SLURM_ARGS=--cluster-config {cluster}"]
    setting = Path("smoke", "multiconer", "en", "gold100", "seed1")
    aclm = runs / setting / "aclm"

    first = make(*submit, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "3 runs: 0 done, 3 to run in 3 arrays, then the table" in first.stdout
    wait_for(lambda: list(aclm.glob(".s7_*.tmp")), 900, "ACLM's S7 to start", interval=0.2)   # midway
    job = next(line.split()[0] for line in queue(env) if "table1.aclm" in line)
    subprocess.run(["scancel", job], env=env, check=True)
    wait_for(lambda: not any(line.startswith(job) for line in queue(env)), 120, f"job {job} to end")
    assert job_state(job, env) == "CANCELLED"
    assert not scratch(aclm) and not (aclm / "s7_eval" / "result.json").exists()   # the stage cleaned up
    wait_for(lambda: not queue(env), 900, "the first submission's jobs to end")
    assert "missing 0" not in (results / "smoke" / "table1.md").read_text()     # built without the cancelled run

    generated = (aclm / "s5_generation" / "_stage.json").stat().st_mtime_ns
    second = make(*submit, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 runs: 2 done, 1 to run in 1 arrays, then the table" in second.stdout
    assert "table1.aclm " in second.stdout                     # waits for nothing: its S1 is done
    wait_for(lambda: not queue(env), 900, "the second submission's jobs to end")
    assert (aclm / "s5_generation" / "_stage.json").stat().st_mtime_ns == generated   # resumed after S5
    table = (results / "smoke" / "table1.md").read_text()
    assert "missing 0" in table

    logs = runs / "smoke" / "logs"
    assert sorted(p.name for p in logs.glob("*.log")) == [
        "multiconer-en-gold100-seed1-aclm.log", "multiconer-en-gold100-seed1-gold_only.log",
        "multiconer-en-gold100-seed1-lwtr.log", "table1.aggregate.log"]
    aclm_log = (logs / "multiconer-en-gold100-seed1-aclm.log").read_text()
    assert aclm_log.count("== ") == 2 and "CANCELLED" in aclm_log       # both attempts, and Slurm's note

    shutil.move(runs, tmp_path / "slurm-runs")
    for stage in ("data", "s1_ner", "s1_eval"):
        shutil.copytree(tmp_path / "slurm-runs" / setting / stage, runs / setting / stage)
    made = make("reproduce-table1", *SLICE, f"RUNS={runs}", f"RESULTS={tmp_path / 'make-results'}", env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    assert (runs / setting / "s1_ner" / "_stage.json").read_text() == \
        (tmp_path / "slurm-runs" / setting / "s1_ner" / "_stage.json").read_text()       # S1 was reused
    made_table = (tmp_path / "make-results" / "smoke" / "table1.md").read_text()
    assert "Runtime: " in table and without_runtimes(table) == without_runtimes(made_table)
