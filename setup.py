"""Ship templates/ and schemas/ inside the wheel (as mlcc/_templates, mlcc/_schemas), so a
non-editable `pip install .` finds them; all other metadata lives in pyproject.toml."""

from pathlib import Path
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithTemplates(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        for src, dst in (("templates", "_templates"), ("schemas", "_schemas")):
            if (root / src).is_dir():
                target = Path(self.build_lib) / "mlcc" / dst
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(root / src, target)


setup(cmdclass={"build_py": BuildWithTemplates})
