"""The console script tessera-export-run: runs the C++ runner shipped in the package
(tessera/bin/tessera-export-run; in a build tree, build/<preset>/bin), with the same arguments."""
import os
import sys

import tessera


def runner_path():
    """The path of the tessera-export-run executable, or FileNotFoundError naming where it looked."""
    package = os.path.dirname(os.path.abspath(tessera.__file__))
    native = os.path.dirname(os.path.realpath(tessera._C.__file__))
    candidates = [os.path.join(package, "bin", "tessera-export-run"),
                  os.path.join(native, "bin", "tessera-export-run"),
                  os.path.join(native, "..", "..", "bin", "tessera-export-run")]
    for c in candidates:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    raise FileNotFoundError(f"tessera-export-run: the executable is not in the package; looked at {candidates}")


def main():
    path = runner_path()
    os.execv(path, [path] + sys.argv[1:])
