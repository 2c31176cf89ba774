"""Fuzz the simulator's API from its own OpenAPI schema (schemathesis, over real HTTP):
whatever the generated request, valid or not, the answer is never a 5xx, and answers match the
schema. (Hypothesis drives schemathesis' strategy directly: its pytest plugin's lazy fixture
loader does not run under pytest 9.)"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (dev extra)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api_never_answers_5xx(server_url, mode):
    # the real-model endpoints run a pretrained model per request: fuzzed on their own in
    # test_web_model_api.py, with fewer examples
    schema = schemathesis.openapi.from_url(f"{server_url}/api/openapi.json").exclude(
        path_regex="^/api/model")
    statuses = []

    @given(case=schema.as_strategy(mode))
    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        response = case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
        statuses.append(response.status_code)

    check()
    assert statuses and max(statuses) < 500
    if mode is GenerationMode.NEGATIVE:
        assert any(400 <= s < 500 for s in statuses)  # the fuzzer did reach the validation
    else:
        assert 200 in statuses
