"""Builds the package with the wire stubs in it (pyproject.toml holds the metadata).

The stubs are generated, never committed (generate.sh). Building from this checkout, the
build runs generate.sh into its own tree, so an installed package always carries stubs made
from the proto/ it was built with by this machine's protoc. Without proto/ or protoc (a copy
of this directory alone), it takes the stubs generate.sh left in codemode_client/_gen/.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO = HERE.parent.parent / "proto"
SOURCE_GEN = HERE / "codemode_client" / "_gen"


class BuildWithStubs(build_py):
    def run(self) -> None:
        # The build tree is reused between builds in place: start it empty, so a module
        # removed from the source is not packaged from an earlier build.
        shutil.rmtree(Path(self.build_lib) / "codemode_client", ignore_errors=True)
        super().run()
        target = Path(self.build_lib) / "codemode_client" / "_gen"
        generators = shutil.which("protoc") and shutil.which("grpc_python_plugin")
        if PROTO.is_dir() and generators:
            subprocess.run(["bash", str(HERE / "generate.sh"), str(target)], check=True)
        elif (SOURCE_GEN / "codemode" / "sandbox" / "v1" / "sandbox_pb2.py").is_file():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(SOURCE_GEN, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            raise SystemExit(
                "codemode_client: no wire stubs to package: build from the repository checkout with protoc and "
                "grpc_python_plugin installed (Debian: protobuf-compiler protobuf-compiler-grpc), "
                "or run clients/python/generate.sh first"
            )


setup(cmdclass={"build_py": BuildWithStubs})
