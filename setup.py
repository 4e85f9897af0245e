"""pip's way in: builds the extension stragglar.torch._C with CMake against the torch installed in
this Python, and installs the package python/stragglar with it (pyproject.toml has the metadata).

    python3 -m pip install --no-build-isolation .

--no-build-isolation: the extension must be built against *this* environment's torch (an
isolated build would download another torch to build against). What the build needs besides torch:
CMake >= 3.25, a C++20 compiler, UCX (libucx-dev) and the project's other Debian packages
(`bash scripts/install-deps.sh`); nvcc + NCCL add the CUDA engine (STRAGGLAR_CUDA=AUTO|ON|OFF in
the environment, default AUTO). CMAKE_BUILD_PARALLEL_LEVEL sets the build's parallelism.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    """An extension module built by a CMake target (no sources for setuptools to compile)."""

    def __init__(self, name: str, target: str, built_as: str):
        super().__init__(name, sources=[])
        self.target = target
        self.built_as = built_as  # the module's path inside the CMake build tree


class CMakeBuild(build_ext):
    def build_extension(self, ext: CMakeExtension) -> None:
        build_dir = Path(self.build_temp).resolve() / "cmake"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DSTRAGGLAR_TORCH=ON",  # fail loudly when torch or UCX is missing
            f"-DSTRAGGLAR_PYTHON={sys.executable}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DSTRAGGLAR_CUDA={os.environ.get('STRAGGLAR_CUDA', 'AUTO')}",
            "-DSTRAGGLAR_MPI=OFF", "-DSTRAGGLAR_TESTS=OFF", "-DSTRAGGLAR_BENCH=OFF",
        ]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", ext.target, "-j", jobs], check=True)
        built = build_dir / ext.built_as
        if not built.is_file():
            raise RuntimeError(f"CMake built {ext.target}, but {built} is missing")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)
        shutil.copymode(built, dest)


def torch_requirement() -> list[str]:
    """The extension is built against this torch's C++ ABI: it needs exactly this version."""
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("stragglar: build with --no-build-isolation in an environment that has torch "
                           "(python3 -m pip install torch), the extension is built against it") from e
    # The distribution's version, as pip compares it: torch.__version__ may carry a local label
    # ("2.15.0+cu132") that the installed wheel's metadata does not ("2.15.0"), and a pin with
    # it would then never be satisfied.
    from importlib.metadata import PackageNotFoundError, version
    try:
        installed = version("torch")
    except PackageNotFoundError:  # torch built from source and not installed as a distribution
        return []
    return [f"torch=={installed}"]


setup(
    ext_modules=[CMakeExtension("stragglar.torch._C", "stragglar_torch",
                                "python/stragglar/torch/_C" + sysconfig.get_config_var("EXT_SUFFIX"))],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=torch_requirement(),
    # Not ./build: that is the CMake build directory of scripts/run.sh and scripts/test.sh.
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
