"""Where mpi4py's own test suite lives (tools/install_deps.sh puts the test/ folder of
the source distribution pinned in mpi/requirements-mpi4py-tests.txt here)."""

MPI4PY_TESTS_DIR = "/opt/tessera/mpi4py-tests"
