"""tessera as a torch.distributed backend.

    import tessera_torch                      # registers the backend "tessera"
    torch.distributed.init_process_group("tessera", ...)

Every init method of torch works (env://, tcp://, file://): the ranks of each group find
one another through the group's c10d store, where group rank 0 publishes the tessera
unique id. The group's timeout becomes the communicator's timeout. Under mpirun or srun,
importing this module also fills RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the
launcher's variables when they are not set (MASTER_ADDR and MASTER_PORT still come from
the user, as for any env:// run). See docs/pytorch.md.
"""

import atexit
import os

import torch.distributed as dist

from . import _C

# A group that outlives the script (a DDP hook's state may hold it past
# destroy_process_group) is stopped before the interpreter's teardown, which would end a
# worker thread running a future's Python callback in the middle of it.
atexit.register(_C.shutdown_all)

__all__ = ["BACKEND"]

BACKEND = "tessera"

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
    return _C.create_process_group(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout,
        str(options.group_id),
        [int(r) for r in (options.global_ranks_in_group or [])],
    )


def _register():
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


_fill_from_launcher()
_register()
