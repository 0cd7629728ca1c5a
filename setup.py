"""Builds erg._core with CMake (the project's own build) and packages python/erg.

The C++ build runs in build/pip (kept between installs, so a reinstall is incremental); the
simulated libnvidia-ml.so.1 is shipped in erg/_sim/ so ERG_SIMULATE works from an install.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.join(ROOT, "build", "pip")
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release",
                               "-DERG_BUILD_TESTS=OFF", "-DERG_BUILD_BENCH=OFF", "-DERG_BUILD_DAEMON=OFF",
                               f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "erg_python", "erg_sim_nvml",
                               "-j", str(os.cpu_count() or 2)])
        out = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(glob.glob(os.path.join(build, "python", "erg", "_core*.so"))[0], out)
        sim_dir = os.path.join(os.path.dirname(out), "_sim")
        os.makedirs(sim_dir, exist_ok=True)
        shutil.copy2(os.path.join(build, "sim", "driver", "libnvidia-ml.so.1"), sim_dir)


setup(
    packages=find_packages("python", include=["erg", "erg.*"]),  # erg.compat.zeus.monitor, ...
    package_dir={"": "python"},
    package_data={"erg": ["py.typed", "*.pyi", "compat/*.pyi"]},
    ext_modules=[Extension("erg._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
