"""An error answer stays a few KB whatever the request, over real HTTP, on every POST route the
app has (read from its OpenAPI schema, so a new route is covered by being added): 300,000
unknown keys are refused naming at most a few, and many invalid values, deep nesting and huge
strings are answered in a few lines."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv.web import errors, schemas  # noqa: E402
from qkv.web.app import create_app  # noqa: E402

SMALL = 4096  # bytes: "a few KB"
UNKNOWN = 300_000
JSON = {"content-type": "application/json"}


def _post_routes() -> dict[str, dict]:
    """POST path -> its request body's JSON schema (properties resolved), from OpenAPI."""
    spec = create_app().openapi()
    defs = spec["components"]["schemas"]

    def resolved(schema):
        return defs[schema["$ref"].split("/")[-1]] if "$ref" in schema else schema

    routes = {}
    for path, ops in spec["paths"].items():
        if "post" in ops:
            body = ops["post"]["requestBody"]["content"]["application/json"]["schema"]
            routes[path] = {"schema": resolved(body), "resolved": resolved, "defs": defs}
    return routes


ROUTES = _post_routes()


def test_the_routes_are_read_from_the_app():
    assert {"/api/trace", "/api/practice/check", "/api/model/trace", "/api/model/patch"} <= set(
        ROUTES
    )
    assert nested_objects("/api/model/patch") == ["edit"]


@pytest.fixture(scope="module")
def client(server_url):
    with httpx.Client(base_url=server_url, timeout=120) as c:
        yield c


def post(client, path, body: bytes):
    r = client.post(path, content=body, headers=JSON)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert len(r.content) < SMALL, (len(r.content), r.text[:300])
    return r


def many_keys(n: int = UNKNOWN) -> dict:
    return {f"k{i:06x}": 1 for i in range(n)}


@pytest.fixture(scope="module")
def unknown_body() -> bytes:
    body = json.dumps(many_keys(), separators=(",", ":")).encode()
    assert 3_000_000 < len(body) < schemas.MAX_BODY_BYTES  # under the limit: it is read
    return body


def named_keys(r) -> set:
    return {d["loc"][-1] for d in r.json()["detail"] if str(d["loc"][-1]).startswith("k")}


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_300000_unknown_keys_are_named_at_most_a_few(client, unknown_body, path):
    r = post(client, path, unknown_body)
    assert r.status_code == 422
    named = named_keys(r)
    assert 1 <= len(named) <= errors.MAX_ITEMS
    assert named <= set(many_keys(errors.MAX_ITEMS))  # the first ones, in the body's order
    message = r.json()["message"]
    assert f"and {UNKNOWN - len(named):,} more problems" in message
    assert f"k{UNKNOWN - 1:06x}" not in r.text


def nested_objects(path) -> list[str]:
    """The properties of the route's body that hold an object of their own schema."""
    route = ROUTES[path]
    found = []
    for name, prop in route["schema"]["properties"].items():
        options = prop.get("anyOf", [prop])
        if any("$ref" in o and "properties" in route["resolved"](o) for o in options):
            found.append(name)
    return found


@pytest.mark.parametrize(
    "path, field", [(p, f) for p in sorted(ROUTES) for f in nested_objects(p)]
)  # fmt: skip
def test_unknown_keys_inside_a_nested_object_are_named_at_most_a_few(client, path, field):
    body = json.dumps({field: many_keys()}, separators=(",", ":")).encode()
    r = post(client, path, body)
    named = named_keys(r)
    assert 1 <= len(named) <= errors.MAX_ITEMS
    assert all(d["loc"][:2] == ["body", field] for d in r.json()["detail"] if d["loc"][-1] in named)


def every_field(path, value) -> dict:
    return {name: value for name in ROUTES[path]["schema"]["properties"]}


@pytest.mark.parametrize("path", sorted(ROUTES))
@pytest.mark.parametrize(
    "kind",
    ["invalid values", "deep lists", "deep objects", "huge strings", "huge key"],
)
def test_every_kind_of_bad_body_gets_a_small_answer(client, path, kind):
    first = next(iter(ROUTES[path]["schema"]["properties"]))
    if kind == "invalid values":  # strings where numbers go: one error each, 32,768 a field
        body = json.dumps(every_field(path, [[["a"] * 64] * 64] * 8))
    elif kind == "deep lists":
        body = f'{{"{first}":' + "[" * 100_000 + "]" * 100_000 + "}"
    elif kind == "deep objects":
        body = '{"a":' * 100_000 + "1" + "}" * 100_000
    elif kind == "huge strings":
        body = json.dumps(every_field(path, "Ω" * 50_000), ensure_ascii=False)
    else:
        body = json.dumps({"Ω" * 1_000_000: 1}, ensure_ascii=False)
    assert len(body.encode()) < schemas.MAX_BODY_BYTES  # read, not refused for its size
    r = post(client, path, body.encode())
    answer = r.json()
    assert len(answer["detail"]) <= errors.MAX_ITEMS
    assert "Ω" * 201 not in r.text  # at most ~200 characters of the input come back


def test_an_answer_names_at_most_max_items_and_counts_the_rest():
    items = [{"loc": ["body", f"f{i}"], "msg": "bad", "type": "t"} for i in range(100)]
    answer = json.loads(errors.error_response(422, items).body)
    assert [d["loc"] for d in answer["detail"]] == [["body", f"f{i}"] for i in range(5)]
    assert answer["message"] == "; ".join(f"f{i}: bad" for i in range(5)) + (
        "; and 95 more problems"
    )
    deep = [{"loc": ["body", *range(1000)], "msg": "m" * 10_000, "type": "t"}]
    answer = json.loads(errors.error_response(422, deep).body)
    assert answer["detail"][0]["loc"] == ["body", 0, 1, 2, 3, 4, 5, "…"]
    assert len(answer["detail"][0]["msg"]) == errors.MAX_MSG + 1  # cut, with "…"
