"""torch.distributed plumbing for runs launched by torchrun or `accelerate launch` (both set RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT). No launcher of our own: one process = one device."""

from __future__ import annotations

import os
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


def setup(device: str | None = None) -> Dist:
    """Join the process group when launched with WORLD_SIZE > 1 (nccl on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(device or default_device(local_rank))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        # Rank 0 tokenises the corpus while the others wait at a barrier: allow hours, not the 10-30 min default.
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
