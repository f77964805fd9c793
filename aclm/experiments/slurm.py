"""A grid on Slurm: job arrays chained setting by setting, one log file per run (usage: docs/cluster.md).

One array per method (one for the S1 runs), task ID = the setting's index in the slice, so an array waits for its
prerequisites' array task by task (``aftercorr``): a setting's methods start once its own S1 is trained, and a
failed S1 holds back only its own setting.  Slurm pairs a task without a counterpart with the whole array it
depends on, so runs whose prerequisites are done go to arrays of their own, with no dependency.  A batch script
``exec``s its run so that ``scancel``'s SIGTERM reaches Python, which removes the running stage's scratch folder.
"""

from __future__ import annotations

import getpass
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby
from pathlib import Path
from typing import Optional, Sequence

import yaml

from aclm.base.io import atomic_write_text, read_json, write_json
from aclm.base.paths import CONFIG_DIR, PROJECT_ROOT
from aclm.experiments.grid import Cell, GridError, with_prerequisites

CLUSTER_FILE = CONFIG_DIR / "cluster.yaml"
PHASE_RESOURCES = ("s1", "methods", "wikineural")     # the cluster.phases section of phases 0, 1, 2
AGGREGATE = "aggregate"
RESOURCE_KEYS = {"gpus", "cpus", "mem", "time"}
RECORD = "submission.json"


class SlurmError(GridError):
    pass


@dataclass(frozen=True)
class Resources:
    gpus: int
    cpus: int
    mem: str
    time: str


@dataclass(frozen=True)
class Cluster:
    phases: dict[str, Resources]
    partition: Optional[str] = None
    account: Optional[str] = None
    sbatch: tuple[str, ...] = ()
    gpu_gres: str = "gpu"            # "shard": a phase's gpus count GPU shards, several runs to a GPU

    def options(self, phase: str) -> list[str]:
        need = self.phases[phase]
        gres = [f"--gres={self.gpu_gres}:{need.gpus}"] if need.gpus else []
        where = [f"--{k}={v}" for k, v in (("partition", self.partition), ("account", self.account)) if v]
        return [*gres, f"--cpus-per-task={need.cpus}", f"--mem={need.mem}", f"--time={need.time}", *where, *self.sbatch]


def load_cluster(path: Path = CLUSTER_FILE, partition: Optional[str] = None,
                 account: Optional[str] = None) -> Cluster:
    """The ``cluster:`` section of ``path``; a partition or account given here wins over the file's."""
    raw = (yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}).get("cluster")
    if not raw:
        raise SlurmError(f"{path}: needs a cluster: section")
    phases = {}
    for name in (*PHASE_RESOURCES, AGGREGATE):
        given = (raw.get("phases") or {}).get(name) or {}
        if set(given) != RESOURCE_KEYS:
            raise SlurmError(f"{path}: cluster.phases.{name} needs exactly {sorted(RESOURCE_KEYS)}")
        phases[name] = Resources(int(given["gpus"]), int(given["cpus"]), str(given["mem"]), str(given["time"]))
    gpu_gres = raw.get("gpu_gres", "gpu")
    if gpu_gres not in ("gpu", "shard"):
        raise SlurmError(f"{path}: cluster.gpu_gres is gpu or shard, not {gpu_gres!r}")
    return Cluster(phases, partition or raw.get("partition"), account or raw.get("account"),
                   tuple(raw.get("sbatch") or ()), gpu_gres)


# --- planning --------------------------------------------------------------------------------

@dataclass
class Array:
    """One job array: the runs of one method (or sweep point) on several settings, task ID = setting index."""

    name: str
    label: str                                   # the method directory's name: method[@variant]
    phase: int
    after: Optional["Array"] = None              # the array whose task i must succeed before task i here
    tasks: dict[int, Cell] = field(default_factory=dict)

    @property
    def resources(self) -> str:
        return PHASE_RESOURCES[min(self.phase, len(PHASE_RESOURCES) - 1)]


def setting_indices(cells: Sequence[Cell]) -> dict[Path, int]:
    """Each setting's index in the slice: the same in every array, so aftercorr pairs a setting's runs."""
    roots = dict.fromkeys(cell.layout.root for cell in with_prerequisites(cells))
    return {root: i for i, root in enumerate(roots)}


def plan(cells: Sequence[Cell], grid: str) -> tuple[list[Array], int]:
    """The arrays that run what is not done of ``cells`` (with prerequisites), and how many runs are done.  A run
    waits for the latest-phase array among its prerequisites still to run, which waits for the earlier ones."""
    index = setting_indices(cells)
    arrays: dict[tuple[str, Optional[str]], Array] = {}
    holder: dict[Path, Array] = {}               # result path -> the array that runs it
    done = 0
    for cell in with_prerequisites(cells):       # phase order: prerequisites are placed first
        if cell.is_done():
            done += 1
            continue
        queued = [holder[p.layout.result_path] for p in cell.prerequisites() if p.layout.result_path in holder]
        after = max(queued, key=lambda a: a.phase, default=None)
        label = cell.layout.method_dir.name
        key = (label, after.name if after else None)
        if key not in arrays:
            name = f"{grid}.{label}" + (f".after-{after.label}" if after else "")
            arrays[key] = Array(name, label, cell.phase, after)
        arrays[key].tasks[index[cell.layout.root]] = cell
        holder[cell.layout.result_path] = arrays[key]
    return list(arrays.values()), done


def id_ranges(ids: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``, the form of ``sbatch --array``."""
    runs = [[i for _, i in run] for _, run in groupby(enumerate(sorted(ids)), lambda pair: pair[1] - pair[0])]
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def run_label(cell: Cell) -> str:
    """A run's log file name: its method folder below the profile (``multiconer-en-gold100-seed1-aclm``)."""
    return "-".join(cell.layout.method_dir.relative_to(Path(cell.runs) / cell.profile).parts)


# --- batch scripts ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Places:
    """Where a submission's files go (absolute paths: the jobs run in ``workdir``)."""

    workdir: Path                                # the jobs' working directory (a relative run_dir is below it)
    logs: Path                                   # one <run>.log per run
    submission: Path                             # scripts, task links and the job IDs of this submission

    @classmethod
    def of(cls, runs: str, profile: str, grid: str, workdir: Path) -> "Places":
        base = (workdir / runs / profile).resolve()
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        return cls(workdir.resolve(), base / "logs", base / "slurm" / f"{grid}-{stamp}")

    def link(self, array: Array) -> Path:
        return self.submission / "tasks" / array.name

    def absolute(self, cell: Cell) -> str:
        """A run's result path as the record keeps it, however ``run_dir`` was spelt."""
        return str((self.workdir / cell.layout.result_path).resolve())


def header(name: str, options: list[str], output: Path, dependency: Optional[str]) -> list[str]:
    """A batch script's ``#SBATCH`` lines; output appended, so that a resubmitted run's log keeps its history."""
    wait = [f"--dependency={dependency}"] if dependency else []
    if dependency and dependency.startswith("aftercorr"):
        wait.append("--kill-on-invalid-dep=yes")  # a task whose prerequisite failed ends, cancelled
    return ["#!/bin/bash", *(f"#SBATCH {o}" for o in [f"--job-name={name}", *options, *wait,
                                                      f"--output={output}", "--open-mode=append"])]


STAMP_LINE = ('echo "== $(date \'+%F %T\') job $SLURM_JOB_ID ($SLURM_JOB_NAME{task}) on $(hostname)"')


def array_script(array: Array, cluster: Cluster, places: Places, python: str, dependency: Optional[str]) -> str:
    """The batch script of an array: task i runs setting i's command with ``exec`` (signals reach Python)."""
    options = [f"--array={id_ranges(list(array.tasks))}", *cluster.options(array.resources),
               f"--chdir={places.workdir}"]
    lines = header(array.name, options, places.link(array) / "%a", dependency)
    lines += [f"# {array.label}, phase {array.phase}: task i is setting i of the slice; its output goes to "
              f"{places.logs}/<run>.log", 'case "$SLURM_ARRAY_TASK_ID" in']
    for i, cell in sorted(array.tasks.items()):
        lines.append(f"  {i}) set -- {shlex.join([str(cell.layout.result_path), *cell.args()])} ;;  # {run_label(cell)}")
    lines += ['  *) echo "no run for task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;', "esac",
              STAMP_LINE.format(task=" task $SLURM_ARRAY_TASK_ID"),
              f'exec {shlex.quote(python)} {shlex.quote(str(PROJECT_ROOT / "scripts" / "grid.py"))} cell "$@"', ""]
    return "\n".join(lines)


def aggregate_script(grid: str, cluster: Cluster, places: Places, python: str, aggregate_args: list[str],
                     dependency: Optional[str]) -> str:
    """The batch script that writes the table (scripts/aggregate.py) once the arrays have ended."""
    options = [*cluster.options(AGGREGATE), f"--chdir={places.workdir}"]
    command = [python, str(PROJECT_ROOT / "scripts" / "aggregate.py"), grid, *aggregate_args]
    lines = header(f"{grid}.{AGGREGATE}", options, places.logs / f"{grid}.{AGGREGATE}.log", dependency)
    return "\n".join([*lines, STAMP_LINE.format(task=""), f"exec {shlex.join(command)}", ""])


# --- submitting ------------------------------------------------------------------------------

def sbatch(script: Path) -> str:
    """Submit a batch script; its job ID."""
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SlurmError(f"sbatch {script} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]


def queued_jobs() -> set[str]:
    """The (array) job IDs of this user still pending or running."""
    done = subprocess.run(["squeue", "--noheader", "--format=%F", f"--user={getpass.getuser()}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SlurmError(f"squeue failed: {done.stderr.strip()}")
    return set(done.stdout.split())


def still_queued(slurm_dir: Path) -> dict[str, str]:
    """Result path -> job ID, for every run that an earlier submission still has in the queue."""
    records = [read_json(p) for p in sorted(slurm_dir.glob(f"*/{RECORD}"))]
    if not records:
        return {}
    queued = queued_jobs()
    return {result: job["id"] for record in records for job in record["jobs"] if job["id"] in queued
            for result in job.get("tasks", {}).values()}


def link_logs(array: Array, places: Places) -> None:
    """Point the array's ``--output`` (one link per task) at each run's own log file."""
    folder = places.link(array)
    folder.mkdir(parents=True, exist_ok=True)
    for i, cell in array.tasks.items():
        (folder / str(i)).symlink_to(places.logs / f"{run_label(cell)}.log")


@dataclass
class Job:
    name: str
    script: str
    dependency: Optional[str]
    array: Optional[Array] = None
    id: Optional[str] = None

    def record(self, places: "Places") -> dict:
        tasks = {str(i): places.absolute(c) for i, c in self.array.tasks.items()} if self.array else {}
        return {"name": self.name, "id": self.id, "dependency": self.dependency, "tasks": tasks}


def array_job(array: Array, cluster: Cluster, places: Places, python: str, ids: dict[str, str]) -> Job:
    """An array's job; the ID it waits for comes from ``ids`` (a placeholder where not yet submitted)."""
    after = array.after
    dependency = f"aftercorr:{ids.get(after.name, f'<{after.name}>')}" if after else None
    return Job(array.name, array_script(array, cluster, places, python, dependency), dependency, array)


def table_job(arrays: list[Array], grid: str, cluster: Cluster, places: Places, python: str,
              aggregate_args: list[str], ids: dict[str, str]) -> Job:
    """The job writing the table after every array has ended, however its tasks ended."""
    dependency = ("afterany:" + ":".join(ids.get(a.name, f"<{a.name}>") for a in arrays)) if arrays else None
    return Job(f"{grid}.{AGGREGATE}", aggregate_script(grid, cluster, places, python, aggregate_args, dependency),
               dependency)


def plan_jobs(arrays: list[Array], grid: str, cluster: Cluster, places: Places, python: str,
              aggregate_args: list[str]) -> list[Job]:
    """The jobs of a submission as ``--dry-run`` shows them, dependencies as <job name> placeholders."""
    return [*(array_job(a, cluster, places, python, {}) for a in arrays),
            table_job(arrays, grid, cluster, places, python, aggregate_args, {})]


def check_not_queued(arrays: list[Array], places: Places) -> None:
    """Refuse to submit a run that an earlier submission still has pending or running."""
    held = still_queued(places.submission.parent) if places.submission.parent.exists() else {}
    clash = sorted({held[places.absolute(c)] for a in arrays for c in a.tasks.values() if places.absolute(c) in held})
    if clash:
        raise SlurmError(f"runs of this slice are still queued in job(s) {', '.join(clash)} of an earlier "
                         f"submission: wait for them or scancel them, then submit again")


def send(job: Job, places: Places, ids: dict[str, str]) -> Job:
    """Keep the job's script in the submission folder and sbatch it; its ID goes into ``ids`` for its dependents."""
    path = places.submission / "scripts" / f"{job.name}.sbatch"
    atomic_write_text(path, job.script)
    job.id = ids[job.name] = sbatch(path)
    return job


def submit(arrays: list[Array], grid: str, cluster: Cluster, places: Places, python: str,
           aggregate_args: list[str]) -> list[Job]:
    """Submit the arrays in phase order, each with the job ID it waits for, then the table job; the record is
    written after every job, so a failure halfway still guards the next submission."""
    missing = [c for c in ("sbatch", "squeue") if not shutil.which(c)]
    if missing:
        raise SlurmError(f"{' and '.join(missing)} not found: not a Slurm login node? (--dry-run prints the scripts)")
    check_not_queued(arrays, places)
    places.logs.mkdir(parents=True, exist_ok=True)
    ids: dict[str, str] = {}
    submitted: list[Job] = []

    def record(job: Job) -> None:
        submitted.append(job)
        write_json(places.submission / RECORD, {"grid": grid, "jobs": [j.record(places) for j in submitted]})

    try:
        for array in arrays:
            link_logs(array, places)
            record(send(array_job(array, cluster, places, python, ids), places, ids))
        record(send(table_job(arrays, grid, cluster, places, python, aggregate_args, ids), places, ids))
    except SlurmError:
        if not submitted:                        # nothing reached Slurm: leave no trace of this submission
            shutil.rmtree(places.submission, ignore_errors=True)
        raise
    return submitted


def summary(jobs_: list[Job], runs: int, done: int) -> str:
    """One line per job: name, ID, tasks and what it waits for."""
    todo = sum(len(j.array.tasks) for j in jobs_ if j.array)
    lines = [f"{runs} runs: {done} done, {todo} to run in {len(jobs_) - 1} arrays, then the table"]
    for job in jobs_:
        tasks = f"{len(job.array.tasks):4d} tasks [{id_ranges(list(job.array.tasks))}]" if job.array else ""
        lines.append(f"  {job.name:<40} job {job.id or '-':<8} {tasks:<24} {job.dependency or 'no dependency'}")
    return "\n".join(lines)
