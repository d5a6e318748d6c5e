"""Hydra's LauncherTestSuite for the local_gpus launcher; run in its own process by
test_local_launcher.test_hydra_launcher_suite_passes (the file name keeps pytest from collecting it twice)."""

import pytest
from hydra.test_utils.launcher_common_tests import LauncherTestSuite

# The schema has no defaults (they live in conf/): Hydra's own suites get these.
SETTINGS = ["hydra.launcher.gpus=null", "hydra.launcher.gpus_per_job=0", "hydra.launcher.max_parallel=2",
            "hydra.launcher.fail_fast=false", "hydra.launcher.hooks=null", "hydra.launcher.poll_s=1"]


@pytest.mark.parametrize("launcher_name, overrides", [("local_gpus_schema", SETTINGS)])
class TestLocalGpusLauncher(LauncherTestSuite):
    pass
