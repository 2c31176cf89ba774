"""The practice API over real HTTP: exercises without their answers, answers checked on the
server against independently computed values, bad requests answered 4xx with a message."""

from __future__ import annotations

import math
import re

import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv import practice  # noqa: E402


@pytest.fixture(scope="module")
def client(server_url):
    with httpx.Client(base_url=server_url, timeout=30) as c:
        yield c


def get(client, **params):
    return client.get("/api/practice", params=params)


def check(client, **body):
    return client.post("/api/practice/check", json=body)


def test_topics_list_every_kind(client):
    r = client.get("/api/practice/topics")
    assert r.status_code == 200
    got = r.json()
    assert list(got) == ["sizes", "scores", "softmax", "masks", "concepts"]
    assert sorted(sum(got.values(), [])) == sorted(practice.KINDS)


def test_exercise_is_deterministic_and_has_no_answer(client):
    a = get(client, topic="softmax", seed=12).json()
    assert a == get(client, topic="softmax", seed=12).json()
    assert a["topic"] == "softmax" and a["kind"].startswith("softmax/") and a["seed"] == 12
    assert set(a) == {
        "kind",
        "topic",
        "seed",
        "prompt",
        "answer_type",
        "choices",
        "answer_format",
        "hint",
    }
    fresh = get(client, topic="masks").json()
    assert fresh["topic"] == "masks" and 0 <= fresh["seed"] < 2**32


def test_d_head_answer_checked_against_the_printed_numbers(client):
    ex = get(client, kind="sizes/d_head", seed=5).json()
    d, h = map(int, re.search(r"d_model = (\d+)(?: and|,) (\d+) heads", ex["prompt"]).groups())
    right = check(client, kind="sizes/d_head", seed=5, answer=str(d // h)).json()
    assert right["valid"] and right["correct"] and right["expected"] == f"{d // h:,}"
    assert any(f"= {d // h}" in line for line in right["solution"])
    wrong = check(client, kind="sizes/d_head", seed=5, answer=str(d // h + 3)).json()
    assert wrong["valid"] and not wrong["correct"] and wrong["gap"] == 3
    assert wrong["solution"] == right["solution"]


def test_softmax_answer_by_hand(client):
    for seed in range(6):
        ex = get(client, kind="softmax/softmax", seed=seed).json()
        m = re.search(
            r"softmax\(\[(.*?)\]\)(?: at temperature τ = (\S+))?: .*entry (\d)", ex["prompt"]
        )
        x = [float(v) for v in m.group(1).split(",")]
        tau, j = float(m.group(2) or 1), int(m.group(3))
        p = math.exp(x[j] / tau) / sum(math.exp(v / tau) for v in x)
        got = check(client, kind="softmax/softmax", seed=seed, answer=f"{p:.3f}").json()
        assert got["correct"], (ex["prompt"], p, got)
        assert not check(
            client, kind="softmax/softmax", seed=seed, answer=f"{p + 0.03:.3f}"
        ).json()["correct"]


def test_not_an_answer_is_valid_false_with_a_message(client):
    r = check(client, kind="masks/hidden", seed=3, answer="banana")
    assert r.status_code == 200
    got = r.json()
    assert got["valid"] is False and got["correct"] is False
    assert "expected key positions" in got["message"]
    assert got["expected"] is None and got["solution"] == []  # no answer given away


@pytest.mark.parametrize(
    "params, field",
    [
        ({"topic": "algebra"}, "topic"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**32}, "seed"),
        ({"seed": "x"}, "seed"),
        ({"kind": "sizes/nope"}, "kind"),
        ({"kind": "sizes/d_head", "topic": "masks"}, "kind"),
    ],
)
def test_bad_exercise_requests_are_422(client, params, field):
    r = get(client, **params)
    assert r.status_code == 422, r.text
    assert field in r.json()["message"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"seed": 1, "answer": "1"}, "kind"),
        ({"kind": "sizes/d_head", "answer": "1"}, "seed"),
        ({"kind": "sizes/d_head", "seed": "1", "answer": "1"}, "seed"),
        ({"kind": "sizes/d_head", "seed": 1}, "answer"),
        ({"kind": "sizes/d_head", "seed": 1, "answer": "1" * 201}, "answer"),
        ({"kind": "sizes/d_head", "seed": 1, "answer": "1", "extra": 1}, "extra"),
        ({"kind": "nope", "seed": 1, "answer": "1"}, "kind"),
    ],
)
def test_bad_check_requests_are_422(client, body, field):
    r = check(client, **body)
    assert r.status_code == 422, r.text
    assert field in r.json()["message"]


def test_huge_or_odd_answers_never_5xx(client):
    for answer in ("1e308", "9" * 200, "1/1e-320", "1e999 1", "∞", "\u0000", "a" * 200, ",", "[,]"):
        for kind in ("sizes/parameters", "scores/output", "concepts/order", "masks/hidden"):
            r = check(client, kind=kind, seed=1, answer=answer)
            assert r.status_code == 200, (kind, answer, r.text)
            assert r.json()["valid"] is False
