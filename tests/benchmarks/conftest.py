"""The benchmark smoke checks reuse the orchestration fixtures (the tiny world built once per session)."""

import importlib.util
from types import ModuleType

from tests.conftest import REPO
from tests.orchestration.conftest import tiny_cache  # noqa: F401  (a fixture, found by name)


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py as a module (benchmarks/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
