"""The benchmark smoke checks reuse the orchestration fixtures (the tiny world built once per session)."""

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO
from tests.orchestration.conftest import tiny_cache  # noqa: F401  (a fixture, found by name)


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py as a module (benchmarks/ is scripts, not a package), registered under its name as
    the scripts import each other (a dataclass needs its module registered)."""
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(REPO / "benchmarks" / f"{name}.py"):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
