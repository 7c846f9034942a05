"""The build backend of `pip install ./pytorch` (PEP 517, named in pyproject.toml).

It builds tessera_torch against the torch of the environment pip installs into, as torch
extensions are built, and makes a wheel of:

    tessera_torch/__init__.py, _build.py    the package (build_info.py writes _build.py)
    tessera_torch/_C.so                     every pytorch/*.cc, compiled against that torch
    tessera_torch/libtessera.so             tessera, found by _C.so's RUNPATH ($ORIGIN)

and an entry point in the group torch.distributed.backends, through which torch 2.x
finds the backend "tessera" without an import.

- The torch: pip runs this backend in an isolated environment that does not see the
  target's packages, so the target's Python (the same executable) is asked, in a process
  of its own with pip's isolation variables removed, where its torch is and how it was
  built. Only the torch series tessera is tested against are built (1.13, Debian 12's, and
  the 2.x of requirements-torch2.txt); TESSERA_TORCH_UNSUPPORTED=1 builds against another
  one anyway, untested.
- libtessera.so: TESSERA_LIBRARY=PATH takes one already built; otherwise Bazel builds it in
  the repository this directory belongs to (`bazel build //:libtessera.so`).
- The compiler: $CXX, else g++; `-j` from the number of cores.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import build_info  # noqa: E402  (pytorch/build_info.py, beside this file)

NAME = "tessera_torch"
DEBIAN_TORCH_SERIES = "1.13"  # Debian 12's python3-torch

# What the target's Python prints about its torch (run in a process of its own).
_PROBE = r"""
import json, sys, sysconfig
import torch, torch.utils.cpp_extension as ce
print(json.dumps({
    "torch": torch.__version__,
    "torch_dir": torch.__path__[0],
    "include": ce.include_paths(),
    "lib": ce.library_paths(),
    "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
    "python_include": sysconfig.get_paths()["include"],
    "python_tag": "cp%d%d" % sys.version_info[:2],
}))
"""


class BuildError(Exception):
    pass


def _log(message):
    print("tessera_torch build: " + message, file=sys.stderr, flush=True)


def _target_environment():
    """os.environ without what pip's build isolation sets, so that the target's Python sees
    its own packages."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONNOUSERBASE", "PIP_BUILD_TRACKER"):
        env.pop(name, None)
    return env


def probe_torch():
    done = subprocess.run([sys.executable, "-c", _PROBE], env=_target_environment(), capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise BuildError("the Python being installed into (%s) cannot import torch; install torch first "
                         "(e.g. pip install torch==X), then tessera_torch:\n%s" % (sys.executable,
                                                                                    done.stderr[-2000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def supported_series():
    """The torch series tessera_torch is built and tested against."""
    with open(os.path.join(HERE, "requirements-torch2.txt"), encoding="utf-8") as f:
        pins = re.findall(r"^torch==(\d+\.\d+)\.", f.read(), re.M)
    return [DEBIAN_TORCH_SERIES] + pins


def check_supported(torch_version):
    series = ".".join(torch_version.split("+")[0].split(".")[:2])
    supported = supported_series()
    if series in supported:
        return
    message = "torch %s is not a version tessera_torch supports (%s: the ones it is tested against)" % (
        torch_version, ", ".join(s + ".x" for s in supported))
    if os.environ.get("TESSERA_TORCH_UNSUPPORTED") == "1":
        _log("warning: " + message + "; building anyway (TESSERA_TORCH_UNSUPPORTED=1)")
        return
    raise BuildError(message + "; install one of those, or set TESSERA_TORCH_UNSUPPORTED=1 to try this one")


def libtessera():
    """The path of libtessera.so to package."""
    given = os.environ.get("TESSERA_LIBRARY")
    if given:
        if not os.path.isfile(given):
            raise BuildError("TESSERA_LIBRARY=%s is not a file" % given)
        return given
    bazel = shutil.which("bazel")
    if bazel is None:
        raise BuildError("building libtessera.so needs Bazel (run: bash tools/install_deps.sh in %s), "
                         "or set TESSERA_LIBRARY to a libtessera.so already built" % REPO)
    _log("bazel build //:libtessera.so (in %s)" % REPO)
    done = subprocess.run([bazel, "build", "//:libtessera.so"], cwd=REPO, stdout=sys.stderr)
    if done.returncode != 0:
        raise BuildError("bazel build //:libtessera.so failed (exit %d)" % done.returncode)
    out = subprocess.run([bazel, "info", "bazel-bin"], cwd=REPO, capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "libtessera.so")


def compile_extension(info, library, out_dir):
    """Compiles every pytorch/*.cc against the probed torch and links _C.so into out_dir."""
    cxx = os.environ.get("CXX", "g++")
    std = "-std=c++20" if int(info["torch"].split(".")[0]) >= 2 else "-std=c++17"
    flags = [std, "-O2", "-fPIC", "-g1", "-DNDEBUG", "-D_GLIBCXX_USE_CXX11_ABI=%d" % info["abi"],
             "-I" + REPO, "-I" + os.path.join(REPO, "include"), "-I" + info["python_include"]]
    flags += ["-isystem" + path for path in info["include"] if os.path.isdir(path)]
    sources = sorted(f for f in os.listdir(HERE) if f.endswith(".cc"))
    objects_dir = tempfile.mkdtemp(prefix="tessera_torch_build_")

    def one(source):
        obj = os.path.join(objects_dir, source[:-3] + ".o")
        done = subprocess.run([cxx] + flags + ["-c", os.path.join(HERE, source), "-o", obj], capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise BuildError("compiling pytorch/%s failed:\n%s" % (source, done.stderr[-4000:]))
        return obj

    _log("compiling %d files against torch %s (%s)" % (len(sources), info["torch"], std))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        objects = list(pool.map(one, sources))
    lib_flags = ["-L" + path for path in info["lib"]] + ["-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python"]
    target = os.path.join(out_dir, "_C.so")
    done = subprocess.run([cxx, "-shared", "-o", target] + objects + lib_flags +
                          [library, "-Wl,-rpath,$ORIGIN"], capture_output=True, text=True)
    shutil.rmtree(objects_dir, ignore_errors=True)
    if done.returncode != 0:
        raise BuildError("linking _C.so failed:\n%s" % done.stderr[-4000:])


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def write_wheel(wheel_directory, files, version, python_tag):
    """files: {path in the wheel: bytes}. Returns the wheel's file name."""
    tag = "%s-%s-linux_%s" % (python_tag, python_tag, os.uname().machine)
    dist_info = "%s-%s.dist-info" % (NAME, version)
    files = dict(files)
    files[dist_info + "/METADATA"] = (
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: tessera as a torch.distributed backend (init_process_group(\"tessera\"))\n"
        "License: see tessera's repository\n" % (NAME.replace("_", "-"), version)).encode()
    files[dist_info + "/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tessera build_backend.py\nRoot-Is-Purelib: false\nTag: %s\n" % tag).encode()
    files[dist_info + "/entry_points.txt"] = b"[torch.distributed.backends]\ntessera = tessera_torch:register\n"
    files[dist_info + "/top_level.txt"] = (NAME + "\n").encode()
    record = [_record_line(path, data) for path, data in files.items()] + [dist_info + "/RECORD,,"]
    name = "%s-%s-%s.whl" % (NAME, version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
        wheel.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# --- PEP 517 hooks ---------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    try:
        info = probe_torch()
        check_supported(info["torch"])
        version = build_info.tessera_version(os.path.join(REPO, "include", "tessera", "tessera.h"))
        library = libtessera()
        out = tempfile.mkdtemp(prefix="tessera_torch_wheel_")
        compile_extension(info, library, out)
        package = os.path.join(HERE, NAME)
        files = {
            NAME + "/__init__.py": _read(os.path.join(package, "__init__.py")),
            NAME + "/_build.py": build_info.build_py(version, info["torch"].split("+")[0]).encode(),
            NAME + "/_C.so": _read(os.path.join(out, "_C.so")),
            NAME + "/libtessera.so": _read(library),
        }
        shutil.rmtree(out, ignore_errors=True)
        name = write_wheel(wheel_directory, files, version, info["python_tag"])
        _log("built %s for torch %s" % (name, info["torch"]))
        return name
    except BuildError as e:
        _log("error: %s" % e)
        raise SystemExit(1)


def build_sdist(sdist_directory, config_settings=None):
    raise SystemExit("tessera_torch has no source distribution: install it from tessera's repository "
                     "(pip install ./pytorch), which builds libtessera.so too")
