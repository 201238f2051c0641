"""Builds ipcpipe._core: the C library (the tree above this directory,
with CMake, as a static library) linked into the extension, so that the
installed package needs nothing else.  Nothing is downloaded:

    python3 -m pip install --no-build-isolation ./python
"""
import os
import re
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(ipcpipe\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else "0.0.0"


class CMakeBuildExt(build_ext):
    """Builds the static library first, then the extension against it."""

    def run(self):
        tree = os.path.join(os.path.abspath(self.build_temp), "ipcpipe")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", tree,
                               "-DCMAKE_BUILD_TYPE=Release",
                               "-DBUILD_TESTING=OFF"])
        subprocess.check_call(["cmake", "--build", tree, "--target",
                               "ipcpipe_static", "-j",
                               str(os.cpu_count() or 2)])
        for ext in self.extensions:
            ext.extra_objects = [os.path.join(tree, "src", "libipcpipe.a")]
        super().run()


setup(
    version=version(),
    packages=["ipcpipe"],
    package_data={"ipcpipe": ["_core.pyi", "py.typed"]},
    ext_modules=[Extension("ipcpipe._core",
                           ["ipcpipe/_core.c", "ipcpipe/_buf.c",
                            "ipcpipe/_mem.c"],
                           include_dirs=[os.path.join(ROOT, "include")],
                           libraries=["pthread", "dl"])],
    cmdclass={"build_ext": CMakeBuildExt},
)
