"""The benchmark smoke checks reuse the orchestration fixtures (the tiny world built once per session)."""

from tests.orchestration.conftest import tiny_cache  # noqa: F401  (a fixture, found by name)
