"""Build steps pyproject.toml cannot declare: the optional C extension
hbg._native (stable ABI, needs Python's headers: Debian's python3-dev), and
a copy of the built libhbg and hbg CLI inside the package when the source
tree beside this folder has been built (../build, or HBG_BUILD_DIR), so the
installed package needs no HBG_LIBRARY. Nothing is downloaded."""
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SONAME = "libhbg.so.0"


def include_dir():
    for d in (os.environ.get("HBG_INCLUDE_DIR"), os.path.join(ROOT, "include")):
        if d and os.path.exists(os.path.join(d, "hbg", "hbg.h")):
            return d
    return None


def build_dir():
    return os.environ.get("HBG_BUILD_DIR") or os.path.join(ROOT, "build")


class BuildPyWithLibrary(build_py):
    """build_py, plus libhbg and the CLI from the built tree."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "hbg")
        bdir = build_dir()
        lib = os.path.join(bdir, SONAME)
        if os.path.exists(os.path.join(dst, SONAME)):
            return  # copied into src/hbg by hand: package data
        if not os.path.exists(lib):
            sys.stderr.write(
                "hbg: no built library at %s (run `make` first, or set "
                "HBG_BUILD_DIR): the installed package will look for libhbg "
                "through HBG_LIBRARY and the system's search path\n" % lib)
            return
        shutil.copyfile(os.path.realpath(lib), os.path.join(dst, SONAME))
        cli = os.path.join(bdir, "bin", "hbg")
        if os.path.exists(cli):
            shutil.copyfile(cli, os.path.join(dst, "hbg"))
            os.chmod(os.path.join(dst, "hbg"), 0o755)


ext_modules = []
inc = include_dir()
if inc:
    ext_modules.append(Extension(
        "hbg._native", ["native/hbg_native.c"], include_dirs=[inc],
        define_macros=[("Py_LIMITED_API", "0x03080000")],
        py_limited_api=True, libraries=["dl"],
        optional=True))  # no compiler or headers: ctypes only
else:
    sys.stderr.write("hbg: include/hbg/hbg.h not found beside python/ (or "
                     "HBG_INCLUDE_DIR): building without hbg._native\n")

setup(ext_modules=ext_modules,
      cmdclass={"build_py": BuildPyWithLibrary},
      options={"bdist_wheel": {"py_limited_api": "cp38"}})
