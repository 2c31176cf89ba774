"""Schemathesis over real HTTP, driven by hypothesis directly (its pytest plugin's lazy fixture
loader does not run under pytest 9)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance


def fuzz(schema, mode: GenerationMode, examples: int) -> list[int]:
    """Call ``examples`` generated cases of ``schema``; the status codes, every check passed."""
    statuses = []

    @given(case=schema.as_strategy(mode))
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case):
        response = case.call_and_validate(
            checks=[not_a_server_error, response_schema_conformance],
            timeout=120,  # a model run on a loaded machine can take seconds: no read timeout
        )
        statuses.append(response.status_code)

    check()
    return statuses
