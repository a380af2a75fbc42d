"""torch.distributed plumbing for runs launched by torchrun or `accelerate launch` (both set RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or by `srun -n N` (SLURM sets SLURM_PROCID, SLURM_STEP_NUM_TASKS,
SLURM_LOCALID and the step's node list; see `slurm_environment`). No launcher of our own: one process = one
device."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from biobench.runtime.device import default_device


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: 'gpu[07-09,12],cpu01' -> 'gpu07' (all that MASTER_ADDR needs, so no
    full hostlist expansion and no `scontrol show hostnames` call)."""
    prefix, ranges, suffix = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)", nodelist.strip()).groups()
    return prefix + (ranges.split(",", 1)[0].split("-", 1)[0] if ranges else "") + suffix


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
            "MASTER_PORT": env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000)}


def setup(device: str | None = None) -> Dist:
    """Join the process group when launched with WORLD_SIZE > 1 (nccl on CUDA, gloo on CPU), by torchrun or srun."""
    os.environ.update(slurm_environment(dict(os.environ)))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(device or default_device(local_rank))
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


def wrap(module: torch.nn.Module, d: Dist, fsdp: bool = False) -> torch.nn.Module:
    """DDP (default) or FSDP2 (`fully_shard` per transformer layer, for models too big to replicate).
    DDP is rebuilt at each phase start because the set of trainable parameters changes with freezing; FSDP2
    is applied once (it replaces the parameters, and handles frozen ones itself)."""
    if d.world == 1:
        return module
    if fsdp:
        from biobench.training.freezing import encoder_layers
        from torch.distributed.fsdp import fully_shard

        for layer in encoder_layers(module.model):
            fully_shard(layer)
        return fully_shard(module)
    ids = [d.device.index] if d.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)


def cleanup(d: Dist) -> None:
    if d.world > 1 and dist.is_initialized():
        dist.destroy_process_group()
