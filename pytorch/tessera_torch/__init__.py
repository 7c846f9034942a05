"""tessera as a torch.distributed backend.

    import tessera_torch                      # registers the backend "tessera"
    torch.distributed.init_process_group("tessera", ...)

On torch 2.x the backend serves CPU tensors ("cpu:tessera"), and can share a group
with another backend for other devices ("cpu:tessera,cuda:nccl"); when the package was
installed with pip, torch finds it by its entry point, so `import tessera_torch` is not
even needed. On torch 1.13 the backend is the whole group.

Every init method of torch works (env://, tcp://, file://): the ranks of each group find
one another through the group's c10d store, where group rank 0 publishes the tessera
unique id. The group's timeout becomes the communicator's timeout. Under mpirun or srun,
importing this module also fills RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the
launcher's variables when they are not set (MASTER_ADDR and MASTER_PORT still come from
the user, as for any env:// run). See docs/pytorch.md.
"""

import atexit
import os

import torch
import torch.distributed as dist

from ._build import TORCH_VERSION as _BUILT_FOR, __version__

__all__ = ["BACKEND", "__version__"]

BACKEND = "tessera"


def _series(version):
    """'2.15.0+cu132' -> (2, 15)."""
    parts = version.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


if _series(torch.__version__) != _series(_BUILT_FOR):
    raise ImportError(
        f"tessera_torch {__version__} was built for torch {_BUILT_FOR}, but this Python has "
        f"torch {torch.__version__}: rebuild it for this torch with `pip install ./pytorch` "
        "(from tessera's repository) in this environment"
    )

from . import _C  # noqa: E402  (after the version check: a mismatched _C.so fails to load)

# A group that outlives the script (a DDP hook's state may hold it past
# destroy_process_group) is stopped before the interpreter's teardown, which would end a
# worker thread running a future's Python callback in the middle of it.
atexit.register(_C.shutdown_all)

_TORCH_2 = _series(torch.__version__) >= (2, 0)

# (torch variable, launcher variables that can provide it, first found wins)
_LAUNCHER_VARIABLES = (
    ("RANK", ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")),
    ("WORLD_SIZE", ("OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")),
    ("LOCAL_RANK", ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")),
    ("LOCAL_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
)


def _fill_from_launcher(environ=os.environ):
    """Sets torch's rank variables from mpirun's or srun's when they are missing."""
    for name, sources in _LAUNCHER_VARIABLES:
        if name in environ:
            continue
        for source in sources:
            if source in environ:
                environ[name] = environ[source]
                break


def _create(options, pg_options=None):
    """torch's extended backend constructor: one tessera communicator per group."""
    del pg_options  # tessera has no per-group options beyond torch's
    return _C.create_backend(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout,
        str(options.group_id),
        [int(r) for r in (options.global_ranks_in_group or [])],
    )


def _monitored_barrier_on_1_13():
    """torch 1.13's dist.monitored_barrier refuses every backend but Gloo before asking the
    group; the tessera backend has one (over the group's store), so for a tessera group
    this calls it, and hands any other group to torch's own function."""
    from torch.distributed import distributed_c10d as c10d
    torch_monitored_barrier = c10d.monitored_barrier

    def monitored_barrier(group=c10d.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
        if c10d._rank_not_in_group(group) or dist.get_backend(group) != BACKEND:
            return torch_monitored_barrier(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = c10d.default_pg_timeout
        group_to_use = c10d._get_default_group() if group is None else group
        return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__doc__ = torch_monitored_barrier.__doc__
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


def register():
    """Registers the backend "tessera" with torch.distributed (done on import; also the
    entry point torch 2.x calls for init_process_group("tessera") without the import)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    if _TORCH_2:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


_fill_from_launcher()
register()
if not _TORCH_2:
    _monitored_barrier_on_1_13()
