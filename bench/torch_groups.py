"""The process groups of the PyTorch benchmarks: one group per backend over the same ranks.

The world group is created on the first backend and a group over all ranks on each other
one, so that every backend moves the same tensors between the same processes in one job.
"""
import os

import torch.distributed as dist


def default_init_method():
    """file:// in the run's directory under tools/cluster/cluster.sh run, else env://."""
    run_dir = os.environ.get("CLUSTER_RUN_DIR")
    return "file://" + os.path.join(run_dir, "torch_store") if run_dir else "env://"


def open_groups(backends, timeout, init_method=None):
    """Joins the job; returns (rank, world, {backend: group}).

    Rank and size come from RANK and WORLD_SIZE, which `import tessera_torch` fills from
    mpirun's or srun's variables when they are unset.
    """
    import tessera_torch  # noqa: F401  registers the backend "tessera"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backends[0], init_method=init_method or default_init_method(), rank=rank,
                            world_size=world, timeout=timeout)
    groups = {backends[0]: dist.group.WORLD}
    for backend in backends[1:]:
        groups[backend] = dist.new_group(backend=backend, timeout=timeout)
    return rank, world, groups


def close_groups(groups):
    """Waits for every rank, then destroys the groups (the world group last)."""
    dist.barrier()
    world = dist.group.WORLD
    for group in groups.values():
        if group is not world:
            dist.destroy_process_group(group)
    dist.destroy_process_group()


def parse_backends(text):
    return [b.strip() for b in text.split(",") if b.strip()]
