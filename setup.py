"""Builds the `shardify` wheel. setuptools packages the pure-Python modules (every module of
python/shardify/, with py.typed and the extension's stub _core.pyi); the extension
`shardify._core` comes from a CMake build of this repository (target shardify_python),
copied in as it was built. pyproject.toml holds the rest of the metadata; the version is the
one in the top-level CMakeLists.txt.

Environment:
  SHARDIFY_BUILD_DIR          an existing CMake build tree to take `_core` from, configured
                              for the interpreter that runs pip; its target shardify_python
                              is brought up to date, nothing is reconfigured. Without it the
                              project is configured and built under build-pip/ (kept, so a
                              second install only rebuilds what changed).
  SHARDIFY_CMAKE_ARGS         more arguments for that configure, e.g. "-DSHARDIFY_WITH_ITK=OFF"
                              (ITK is on when CMake finds it, so that shardify.convert works)
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: every core)
  CMAKE_GENERATOR             as CMake reads it (default: Ninja where ninja is installed)
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    """The VERSION of project(shardify ...) in CMakeLists.txt, which the extension reports too."""
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*shardify\s+VERSION\s+([0-9][0-9.]*)", text)
    if not match:
        raise RuntimeError("CMakeLists.txt: expected `project(shardify VERSION x.y.z ...)`")
    return match.group(1)


def run(command, **kwargs):
    print("shardify:", " ".join(shlex.quote(str(part)) for part in command), flush=True)
    subprocess.run([str(part) for part in command], check=True, **kwargs)


def itk_found():
    """Whether CMake finds ITK, asked of a two-line project (about a second)."""
    with tempfile.TemporaryDirectory() as probe:
        Path(probe, "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\n"
                                                 "project(probe LANGUAGES C CXX)\n"
                                                 "find_package(ITK QUIET)\n"
                                                 "file(WRITE ${CMAKE_BINARY_DIR}/found \"${ITK_FOUND}\")\n")
        result = subprocess.run(["cmake", "-S", probe, "-B", os.path.join(probe, "build")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        found = Path(probe, "build", "found")
        return result.returncode == 0 and found.is_file() and found.read_text().strip() in ("1", "TRUE", "ON")


class CMakeBuild(build_ext):
    """Builds `shardify._core` with CMake and copies it to where setuptools packs it."""

    def build_extension(self, ext):
        build_dir = self.reused_build_dir() or self.configure()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        run(["cmake", "--build", build_dir, "--target", "shardify_python", "--parallel", jobs])
        name = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "shardify" / name
        if not built.is_file():
            others = sorted(p.name for p in built.parent.glob("_core*")) or "none"
            raise SystemExit(f"shardify: {build_dir} built no {name} (found: {others}); the tree must be "
                             f"configured with SHARDIFY_WITH_PYTHON for this interpreter, {sys.executable} "
                             f"(-DPython3_EXECUTABLE=...)")
        destination = Path(self.get_ext_fullpath(ext.name))
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, destination)

    def reused_build_dir(self):
        path = os.environ.get("SHARDIFY_BUILD_DIR")
        if not path:
            return None
        if not Path(path, "CMakeCache.txt").is_file():
            raise SystemExit(f"shardify: SHARDIFY_BUILD_DIR={path} holds no CMakeCache.txt (not a CMake build tree)")
        return Path(path).resolve()

    def configure(self):
        build_dir = Path(self.build_temp).resolve() / "cmake"
        user_args = shlex.split(os.environ.get("SHARDIFY_CMAKE_ARGS", ""))
        args = ["-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
                "-DSHARDIFY_WITH_PYTHON=ON", "-DSHARDIFY_WITH_TORCH=OFF", "-DSHARDIFY_BUILD_TESTS=OFF",
                "-DSHARDIFY_SANITIZE=OFF", "-DSHARDIFY_FUZZ=OFF"]
        if not any(arg.startswith("-DSHARDIFY_WITH_ITK") for arg in user_args):
            with_itk = itk_found()
            if not with_itk:
                print("shardify: ITK not found, building without shardify.convert", flush=True)
            args.append(f"-DSHARDIFY_WITH_ITK={'ON' if with_itk else 'OFF'}")
        # The generator is chosen once: CMake refuses another one for an existing tree.
        if (not (build_dir / "CMakeCache.txt").is_file() and not os.environ.get("CMAKE_GENERATOR")
                and shutil.which("ninja")):
            args += ["-G", "Ninja"]
        run(["cmake", "-S", ROOT, "-B", build_dir, *args, *user_args])
        return build_dir


setup(
    version=project_version(),
    # Every module of python/shardify/ (and any subpackage), as it is in the tree.
    packages=find_packages("python", include=["shardify", "shardify.*"]),
    package_dir={"": "python"},
    # PEP 561: the package is typed; the extension's types are in its stub.
    package_data={"shardify": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("shardify._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # Not build/: that is where the README's CMake build lives.
    options={"build": {"build_base": "build-pip"}},
)
