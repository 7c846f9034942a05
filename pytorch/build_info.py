"""Writes tessera_torch/_build.py: the package's version (tessera's, from
include/tessera/tessera.h) and the torch version its extension was compiled against (from
torch's version header), which tessera_torch checks before it loads the extension.

Used by the Bazel build (pytorch/BUILD) and by the pip build (pytorch/build_backend.py).

    python3 build_info.py TESSERA_H TORCH_VERSION_H [TORCH_VERSION_H ...] OUT
"""

import re
import sys


def _macros(paths, names):
    """The integer value of each #define NAME N found in the files."""
    found = {}
    for path in paths:
        with open(path, encoding="utf-8") as header:
            for line in header:
                match = re.match(r"\s*#define\s+(\w+)\s+(\d+)\s*$", line)
                if match and match.group(1) in names:
                    found[match.group(1)] = int(match.group(2))
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(f"build_info.py: {', '.join(missing)} not defined in {', '.join(paths)}")
    return ".".join(str(found[name]) for name in names)


def tessera_version(tessera_header):
    """'0.1.0', from TESSERA_MAJOR/MINOR/PATCH."""
    return _macros([tessera_header], ["TESSERA_MAJOR", "TESSERA_MINOR", "TESSERA_PATCH"])


def torch_version(torch_headers):
    """'2.15.0', from TORCH_VERSION_MAJOR/MINOR/PATCH."""
    return _macros(torch_headers, ["TORCH_VERSION_MAJOR", "TORCH_VERSION_MINOR", "TORCH_VERSION_PATCH"])


def build_py(version, torch):
    """The text of _build.py."""
    return (
        '"""Written when tessera_torch was built (pytorch/build_info.py)."""\n\n'
        f'__version__ = "{version}"\n'
        f'TORCH_VERSION = "{torch}"  # the torch its extension _C was compiled against\n'
    )


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    text = build_py(tessera_version(argv[1]), torch_version(argv[2:-1]))
    with open(argv[-1], "w", encoding="utf-8") as out:
        out.write(text)


if __name__ == "__main__":
    main(sys.argv)
