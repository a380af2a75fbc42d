"""A real one-node SLURM cluster for the tests: Debian's slurmctld + slurmd (22.05), started as root from a
slurm.conf written into a temporary folder, with no munge, systemd, cgroups or slurmdbd.

Measured on the 2-core test machine (issue 36 §5): controller and node are idle in under 1 s; a requeued job
waits `cred_expire` + 1 s before it may start again (121 s by default, ~6 s with `AuthInfo=cred_expire=5`) and
then the next scheduler pass (60 s by default, 1 s with `sched_interval=1`).

No slurmdbd: it needs a MySQL/MariaDB server, which is not one of the three packages and does not start in
seconds. So there is no `sacct`; finished jobs stay visible to `squeue -t all` for `MinJobAge` seconds instead
(one hour here, longer than any test session).

Client commands (squeue, scontrol, scancel) hang 9-60 s retrying when the controller is gone or the conf is
missing, so `stop()` talks to the controller only while its process is alive, and every client call has a timeout.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


def missing_reason() -> str | None:
    """Why this machine cannot run the cluster (one line), or None when it can."""
    absent = [name for name in DAEMONS + CLIENTS if shutil.which(name) is None]
    if absent:
        return (f"SLURM is not installed ({', '.join(absent)} missing): run scripts/install_slurm.sh as root "
                f"(apt-get install slurmctld slurmd slurm-client)")
    if os.geteuid() != 0:
        return "the one-node SLURM cluster of the tests runs its daemons as root, and this is not root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_conf(root: Path, cpus: int) -> Path:
    """slurm.conf for one node named like this host, every path and both ports under `root`/free."""
    node = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(f"""\
ClusterName=bb{os.getpid() % 100000}
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=5
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MinJobAge=3600
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


class SlurmCluster:
    """The running cluster: `env` carries SLURM_CONF for every client command and job."""

    def __init__(self, root: Path, cpus: int = 4):
        self.root = root
        self.conf = write_conf(root, cpus)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, subprocess.Popen] = {}

    def start(self, timeout: float = 20.0) -> str | None:
        """Start both daemons in the foreground (-D) and wait for the node to be idle; the reason on failure."""
        for name in DAEMONS:
            log = open(self.root / "log" / f"{name}.stdout", "wb")  # noqa: SIM115 (the daemon keeps it)
            self.daemons[name] = subprocess.Popen([name, "-D", "-c", "-f", str(self.conf)], env=self.env,
                                                  stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    return f"{name} exited with {proc.returncode} at start: {self.log_tail(name)}"
            state = self.client("sinfo", "-h", "-o", "%T", timeout=5, check=False).stdout.strip()
            if state == "idle":
                return None
            time.sleep(0.2)
        return f"the node is not idle after {timeout:.0f} s: {self.log_tail('slurmd')}"

    def log_tail(self, name: str) -> str:
        path = self.root / "log" / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return " | ".join(lines[-3:]) or "(no log)"

    def controller_up(self) -> bool:
        proc = self.daemons.get("slurmctld")
        return proc is not None and proc.poll() is None

    def client(self, *cmd: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=check)

    def sbatch(self, *args: str) -> int:
        """Submit; the job id."""
        return int(self.client("sbatch", "--parsable", *args).stdout.strip().split(";")[0])

    def states(self, job: int) -> list[str]:
        """The state of the job, or of each element of an array job (finished ones included: MinJobAge)."""
        out = self.client("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T", check=False).stdout
        return out.split()

    def wait(self, job: int, timeout: float, until: set[str] = FINISHED) -> list[str]:
        """Poll until every element of `job` is in `until` (default: finished); the states at the end."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states(job)
            if states and all(s in until for s in states):
                return states
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} still {states} after {timeout:.0f} s "
                                   f"(controller: {self.log_tail('slurmctld')})")
            time.sleep(0.3)

    def stop(self) -> None:
        """Cancel what still runs and stop the daemons, asking the controller only while it is up."""
        if self.controller_up():
            self.client("scancel", "--full", "--user", "root", timeout=10, check=False)
            time.sleep(0.5)
        for proc in self.daemons.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.daemons.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> int:
    """`python -m tests.slurm_cluster DIR`: start the cluster by hand (the perf script, a walk-through), print the
    SLURM_CONF to export, and stop it on Ctrl-C or SIGTERM."""
    import signal
    import sys

    if len(sys.argv) != 2:
        print("usage: python -m tests.slurm_cluster DIR", file=sys.stderr)
        return 2
    reason = missing_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    cluster = SlurmCluster(Path(sys.argv[1]).resolve())
    reason = cluster.start()
    if reason:
        cluster.stop()
        print(f"the cluster did not start: {reason}", file=sys.stderr)
        return 1
    print(f"export SLURM_CONF={cluster.conf}   # the one-node cluster is idle; Ctrl-C stops it", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while cluster.controller_up():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
