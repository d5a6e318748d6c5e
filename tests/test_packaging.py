"""The installable package: a built wheel carries conf/ and runs from any directory (ci/check_wheel.sh also
installs it into a fresh venv and runs a tiny cycle)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_the_package_list_names_every_package_under_src():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(REPO / "src").parts) for init in (REPO / "src").rglob("__init__.py")}
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel .` builds, unpacked: what `pip install` of it puts in site-packages."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # the checkout's files only: a stale build/ in the checkout could hide a gap
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True, text=True,
                           capture_output=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():  # (a file deleted but not yet committed is listed too)
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(out / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (out / "dist").glob("opsd_sweep-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(out / "site")
    return out / "site"


def from_wheel(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`python ARGS` run in `cwd` with the unpacked wheel first on the path (ahead of the checkout)."""
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=120)


def files_under(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("installed, checkout", [("conf", "conf"), ("accelerate_configs", "launchers/accelerate")])
def test_the_wheel_ships_every_config_file(unpacked_wheel, installed, checkout):
    assert files_under(unpacked_wheel / "opsd_sweep" / installed) == files_under(REPO / checkout)


def test_the_wheel_composes_its_configs_outside_the_checkout(unpacked_wheel, tmp_path):
    where = from_wheel(unpacked_wheel, tmp_path, "-c", "import opsd_sweep; print(opsd_sweep.CONF_DIR)")
    assert Path(where.stdout.strip()) == unpacked_wheel / "opsd_sweep/conf", where.stderr
    helped = from_wheel(unpacked_wheel, tmp_path, "-m", "opsd_sweep", "--help")
    assert helped.returncode == 0 and "profile: tiny" in helped.stdout, helped.stderr[-2000:]
    job = from_wheel(unpacked_wheel, tmp_path, "-m", "opsd_sweep", "learning_rate=1.4e-5", "seed=2", "--cfg", "job")
    assert job.returncode == 0, job.stderr[-2000:]
    assert "name: qwen3-1.7b" in job.stdout and "learning_rate: 1.4e-05" in job.stdout and "seed: 2" in job.stdout


def test_the_checkout_install_reads_conf_in_place_from_any_directory(tmp_path):
    """`make install` (editable): conf/ is read where it is, and the Hydra plugins under src/ are found."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([sys.executable, "-c", "import opsd_sweep; print(opsd_sweep.CONF_DIR)"], cwd=tmp_path,
                           env=env, text=True, capture_output=True, timeout=60)
    assert Path(where.stdout.strip()) == REPO / "conf", where.stderr
    job = subprocess.run([sys.executable, "-m", "opsd_sweep", "profile=tiny", "--cfg", "hydra"], cwd=tmp_path,
                         env=env, text=True, capture_output=True, timeout=60)
    assert job.returncode == 0 and "max_parallel: 2" in job.stdout, job.stderr[-2000:]  # the local_gpus launcher
