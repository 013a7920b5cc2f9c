"""The one build step pyproject.toml cannot say: install ``ropepool-blas.pth`` beside the packages.

Python runs the ``import`` line of every ``.pth`` file in site-packages at start-up; this one puts a
small import watcher in ``sys.meta_path`` that calls ``_ropepool_blas.load()`` when MLX is first
imported, so that OpenBLAS is loaded before MLX in every process of the venv (see ``_ropepool_blas.py`` and docs/blas.md). A wheel carries the file at its root; an
editable install (``pip install -e``) gets it in its wheel's root as well.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "ropepool-blas.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        # An editable build assembles its wheel in install_lib and ignores build_lib's extra files.
        root = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        self.copy_file(PTH, os.path.join(root, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        extra = [] if self.editable_mode else [os.path.join(self.build_lib, PTH)]
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={"build_py": BuildPyWithPth})
