"""Where the torch 2.x virtual environment lives (tools/install_deps.sh makes it from
pytorch/requirements-torch2.txt): the build's @pip_torch2 repository and the tests of
//pytorch on torch 2.x read it here."""

TORCH2_VENV = "/opt/tessera/torch2-venv"

# The site-packages directory of its Python (Debian's python3, 3.11).
TORCH2_SITE_PACKAGES = TORCH2_VENV + "/lib/python3.11/site-packages"
