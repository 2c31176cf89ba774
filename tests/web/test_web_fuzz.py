"""Fuzz the simulator's API from its own OpenAPI schema (schemathesis, over real HTTP):
whatever the generated request, valid or not, the answer is never a 5xx, and answers match the
schema.

QKV_FUZZ_EXAMPLES sets the number of cases, split between valid and invalid requests (default
2,000, about 45 s); the real-model routes get 1/40 of it (test_web_model_api.py)."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip(
    "schemathesis", reason="schemathesis is not installed (dev extra)"
)
from schemathesis import GenerationMode  # noqa: E402
from web_fuzz import fuzz  # noqa: E402


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api_never_answers_5xx(server_url, fuzz_examples, mode):
    # the real-model endpoints run a pretrained model per request: fuzzed on their own in
    # test_web_model_api.py, with fewer examples
    schema = schemathesis.openapi.from_url(f"{server_url}/api/openapi.json").exclude(
        path_regex="^/api/model"
    )
    statuses = fuzz(schema, mode, fuzz_examples // 2)
    assert len(statuses) >= 0.9 * (fuzz_examples // 2)  # the budget was spent, not cut short
    assert max(statuses) < 500
    if mode is GenerationMode.NEGATIVE:
        assert any(400 <= s < 500 for s in statuses)  # the fuzzer did reach the validation
    else:
        assert 200 in statuses
