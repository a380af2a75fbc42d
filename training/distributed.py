"""torch.distributed plumbing for runs launched by torchrun or `accelerate launch` (both set RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or by `srun -n N` (SLURM sets SLURM_PROCID, SLURM_STEP_NUM_TASKS,
SLURM_LOCALID and the step's node list; see `slurm_environment`). No launcher of our own: one process = one
device."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from biobench.runtime.device import default_device

if TYPE_CHECKING:
    from biobench.training.objectives import LMLoss


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0


MAX_HOSTS = 100_000  # a node list that expands further is not one SLURM gave this job
_GROUP = re.compile(r"\[([^\]]*)\]")


def expand_hostlist(nodelist: str) -> list[str]:
    """Every host of a SLURM node list, as `scontrol show hostnames` gives them: 'gpu[07-09,12],cpu01' ->
    gpu07 gpu08 gpu09 gpu12 cpu01; several bracket groups per name (HPE/SGI style) expand as a product:
    'r1i[0-1]n[0-3]' -> r1i0n0 r1i0n1 ... r1i1n3. Zero-padding follows the range's first bound."""
    hosts: list[str] = []
    depth, start = 0, 0
    names = []
    for i, char in enumerate(nodelist.strip() + ","):  # split on commas outside brackets
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            names.append(nodelist.strip()[start:i])
            start = i + 1
    for name in filter(None, names):
        expanded = [""]
        pos = 0
        for group in _GROUP.finditer(name):
            options = []
            for part in group[1].split(","):
                low, _, high = part.partition("-")
                if not low.isdigit() or (high and not high.isdigit()):
                    raise ValueError(f"node list {nodelist[:80]!r}: {part!r} is not a number or a range")
                options += [str(n).zfill(len(low)) for n in range(int(low), int(high or low) + 1)]
            expanded = [done + name[pos:group.start()] + option for done in expanded for option in options]
            if len(expanded) > MAX_HOSTS:
                raise ValueError(f"node list {nodelist[:80]!r}: more than {MAX_HOSTS} hosts")
            pos = group.end()
        hosts += [done + name[pos:] for done in expanded]
    return hosts


def first_host(nodelist: str, env: dict[str, str] | None = None) -> str:
    """The first host of a SLURM node list, for MASTER_ADDR: `scontrol show hostnames` where it exists (the
    cluster's own rules), else `expand_hostlist`. The old one-group parser gave 'r1i0n' for 'r1i[0-1]n[0-3]',
    a host that does not exist (issue 48 §5). scontrol answers at once on a node with SLURM's configuration; where
    it has none it retries for up to a minute, hence the 10 s bound before the parser takes over."""
    import shutil
    import subprocess

    path = (env or os.environ).get("PATH")
    scontrol = shutil.which("scontrol", path=path)
    if scontrol is not None:
        try:
            done = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True,
                                  timeout=10, env=env)
            first = done.stdout.split()[:1]
            if done.returncode == 0 and first:
                return first[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    hosts = expand_hostlist(nodelist)
    return hosts[0] if hosts else "127.0.0.1"


def master_port(job_id: str) -> str:
    """The rendezvous port every task of a job computes alike: 20000-29999 from the job id, below Linux's
    ephemeral range (32768-60999, where the old 20000 + id % 20000 could land on a port the OS hands out)."""
    return str(20000 + (int(job_id) if job_id.isdigit() else 0) % 10000)


def visible_device(local_rank: int) -> str:
    """The CUDA device of this process: cuda:LOCAL_RANK when the node's GPUs are all visible, cuda:0 when SLURM
    binds one GPU per task (`--gpus-per-task=1`: each task sees one device, and cuda:LOCAL_RANK did not exist),
    LOCAL_RANK modulo the visible count otherwise; "cpu" without CUDA."""
    if not torch.cuda.is_available():
        return "cpu"
    return f"cuda:{local_rank % max(1, torch.cuda.device_count())}"


def slurm_environment(env: dict[str, str]) -> dict[str, str]:
    """RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT for a process started by `srun -n N` (not by torchrun,
    which sets WORLD_SIZE itself): {} outside an srun step. Only a job *step* counts: the batch script of an
    `sbatch -n 2` job also sees SLURM_PROCID=0 and SLURM_NTASKS=2, but no SLURM_STEP_ID, and must not wait for a
    second rank that srun never started. The port is derived from the job id (every task computes the same one)
    unless MASTER_PORT is set."""
    if "WORLD_SIZE" in env or "SLURM_STEP_ID" not in env or "SLURM_PROCID" not in env:
        return {}
    world = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or "1")
    if world <= 1:
        return {}
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": str(world), "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes),
            "MASTER_PORT": env.get("MASTER_PORT") or master_port(env.get("SLURM_JOB_ID", "0"))}


def setup(device: str | None = None) -> Dist:
    """Join the process group when launched with WORLD_SIZE > 1 (nccl on CUDA, gloo on CPU), by torchrun or srun."""
    os.environ.update(slurm_environment(dict(os.environ)))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(device or (visible_device(local_rank) if world > 1 else default_device(local_rank)))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        # Rank 0 trains a preset's tokenizer while the others wait at a barrier (a raw corpus's token store is
        # waited for on its completion marker, not here: training/corpus_input.py): allow hours, not the default.
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=rank, world_size=world,
                                timeout=timedelta(hours=3))
    return Dist(rank, world, local_rank, dev)


def all_reduce_sum(value: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.world > 1:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def barrier(d: Dist) -> None:
    if d.world > 1:
        dist.barrier()


def wrap(module: LMLoss, d: Dist, fsdp: bool = False) -> torch.nn.Module:
    """DDP (default) or FSDP2 (`fully_shard` per transformer layer, for models too big to replicate).
    DDP is rebuilt at each phase start because the set of trainable parameters changes with freezing; FSDP2
    is applied once (it replaces the parameters, and handles frozen ones itself)."""
    if d.world == 1:
        return module
    if fsdp:
        # lazy: loads torch
        from biobench.training.freezing import encoder_layers
        from torch.distributed.fsdp import fully_shard

        for layer in encoder_layers(module.model):
            fully_shard(layer)
        # fully_shard returns `module` itself, its class swapped for a subclass of it and of FSDPModule
        return fully_shard(module)  # type: ignore[return-value]
    ids = [d.device.index] if d.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)


def cleanup(d: Dist) -> None:
    if d.world > 1 and dist.is_initialized():
        dist.destroy_process_group()
