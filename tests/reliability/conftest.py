"""The fault tests reuse the orchestration fixtures (the tiny world built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_sweep
from tests.orchestration.conftest import tiny_cache  # noqa: F401  (a fixture, found by name)


@pytest.fixture(scope="module")
def finished(request, tmp_path_factory, tiny_cache) -> Path:  # noqa: F811  (tiny_cache: the fixture above)
    """The results root of one finished tiny sweep of the test module's ARGS, built once per module."""
    results = tmp_path_factory.mktemp("finished")
    proc = run_sweep(request.module.ARGS, results, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results
