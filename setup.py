"""The one build step pyproject.toml cannot declare: the wheel carries `device_profiles/`.

The profiles live at the repository root (the layout every doc names), outside the import packages,
so package data cannot reach them; build_py copies them into `ondevice_farm/device_profiles/` of the
wheel, where `ondevice_farm.profiles` looks first. An editable install reads the checkout's own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROFILES = ROOT / "device_profiles"


class BuildPyWithProfiles(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "ondevice_farm" / "device_profiles"
        target.mkdir(parents=True, exist_ok=True)
        for profile in sorted(PROFILES.glob("*.yaml")):
            shutil.copy2(profile, target / profile.name)


setup(cmdclass={"build_py": BuildPyWithProfiles})
