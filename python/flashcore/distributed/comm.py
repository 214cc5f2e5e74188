"""The ring's transport: torch.distributed point-to-point, each rank sending to the next and
receiving from the previous one (NCCL on GPUs, gloo on the CPU); nothing of flashcore's own.

An exchange is started before the attention on the block in hand and waited for after it, so the
transfer runs while the GPU computes: ProcessGroupNCCL runs point-to-point on its own stream, which
waits for the work queued before the exchange started and which the compute stream waits for only
at wait(). Received tensors come from the caching allocator (torch.empty_like), so every exchange
writes into fresh memory and nothing in flight is overwritten; the process group keeps the sent
tensors alive until their transfers complete.
"""

import torch
import torch.distributed as dist

from flashcore.distributed.layout import unshard


def _check_initialized():
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("flashcore.distributed: torch.distributed is not initialised: call "
                           "torch.distributed.init_process_group (backend 'nccl' for CUDA tensors, 'gloo' for CPU "
                           "ones) on every rank first")


class Exchange:
    """Transfers in flight; wait() returns the tensors received."""

    def __init__(self, works, received):
        self._works = works
        self._received = received

    def wait(self):
        for work in self._works:
            work.wait()
        self._works = []
        return self._received


class RingComm:
    """Sends to rank (r + 1) mod n and receives from (r - 1) mod n within `group` (None: the
    default group). With one rank an exchange hands back what it was given."""

    def __init__(self, group=None):
        _check_initialized()
        self.group = group if group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        self.next = dist.get_global_rank(self.group, (self.rank + 1) % self.world_size)
        self.prev = dist.get_global_rank(self.group, (self.rank - 1) % self.world_size)

    def exchange(self, tensors):
        """Starts sending `tensors` to the next rank and receiving as many tensors of the same shapes
        and dtypes from the previous one."""
        if self.world_size == 1:
            return Exchange([], list(tensors))
        received = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
        ops = [dist.P2POp(dist.isend, t.contiguous(), self.next, self.group) for t in tensors]
        ops += [dist.P2POp(dist.irecv, t, self.prev, self.group) for t in received]
        return Exchange(dist.batch_isend_irecv(ops), received)


class LocalComm:
    """RingComm's stand-in that sends nothing: an exchange hands back its own tensors, so the ring
    computes every block it would with communication (on the wrong data). For timing how much the
    sends cost: the benchmark runs the ring with and without them."""

    def __init__(self, rank, world_size):
        self.rank = rank
        self.world_size = world_size

    def exchange(self, tensors):
        return Exchange([], list(tensors))


def gather(local, group=None, layout="zigzag", dim=1):
    """The whole sequence on every rank, from each rank's `local` piece (all_gather, then
    layout.unshard). For tests and inspection: it moves the whole sequence to every rank."""
    _check_initialized()
    group = group if group is not None else dist.group.WORLD
    pieces = [torch.empty_like(local, memory_format=torch.contiguous_format)
              for _ in range(dist.get_world_size(group))]
    dist.all_gather(pieces, local.contiguous(), group=group)
    return unshard(pieces, layout, dim)
