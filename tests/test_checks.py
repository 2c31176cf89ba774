"""The scalar rules of the input contract (``qkv.checks``): what passes, and the one message
each surface shows for what does not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkv import checks


@pytest.mark.parametrize(
    "x, rule, want",
    [
        (2, {}, 2.0),
        (np.float32(0.5), {"above": 0}, 0.5),
        (np.int64(3), {"at_least": 3}, 3.0),
        (-1e300, {}, -1e300),
        (0, {"at_least": 0}, 0.0),
    ],
)
def test_a_number_inside_its_bounds_comes_back_as_a_float(x, rule, want):
    got = checks.number(x, "x", **rule)
    assert type(got) is float and got == want


@pytest.mark.parametrize(
    "x, rule, error, message",
    [
        (0, {"above": 0}, ValueError, "x must be a finite number > 0, got 0"),
        (-0.5, {"at_least": 0}, ValueError, "x must be a finite number ≥ 0, got -0.5"),
        (math.nan, {}, ValueError, "x must be a finite number, got nan"),
        (np.float32(-np.inf), {"above": 0}, ValueError, "x must be a finite number > 0, got -inf"),
        (10**400, {}, ValueError, "x must be a finite number, got an integer of 401 digits"),
        (True, {}, TypeError, "x must be a finite number, got True"),
        ("1", {"above": 0}, TypeError, "x must be a finite number > 0, got '1'"),
        (None, {}, TypeError, "x must be a finite number, got None"),
        ([1.0], {}, TypeError, "x must be a finite number, got [1.0]"),
    ],
)
def test_a_bad_number_is_named_with_its_rule(x, rule, error, message):
    with pytest.raises(error) as e:
        checks.number(x, "x", **rule)
    assert str(e.value) == message


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(TypeError) as e:
        checks.number("y" * 10_000, "x")
    assert len(str(e.value)) < 150 and str(e.value).endswith("… (str)")


def test_the_named_rules_share_the_message():
    with pytest.raises(ValueError, match=r"^temperature must be a finite number > 0, got 0$"):
        checks.temperature_value(0)
    with pytest.raises(ValueError, match=r"^--tau 1.2: τ must be a finite number > 0, got -1$"):
        checks.temperature_value(-1, "--tau 1.2: τ")
    with pytest.raises(ValueError, match=r"≥ 0 \(0 = greedy\), got -0.1$"):
        checks.sampling_temperature(-0.1)
    assert checks.sampling_temperature(0) == 0.0
    assert checks.softcap_value(None) is None and checks.softcap_value(30) == 30.0
    assert checks.scale_factor(None, 16) == 0.25 and checks.scale_factor(1, 16) == 1.0
    with pytest.raises(ValueError, match=r"^scale must be a finite number \(1/√d_k"):
        checks.scale_factor(math.inf, 16)


@pytest.mark.parametrize("n", [0, -3, 2.0, True, "4", None])
def test_positive_int_refuses_what_is_not_a_count(n):
    with pytest.raises(ValueError, match=rf"^size must be a positive integer, got {n!r}$"):
        checks.positive_int("size", n)


def test_positive_int_returns_a_python_int():
    got = checks.positive_int("size", np.int32(7))
    assert type(got) is int and got == 7


def test_a_problems_rule_names_every_setting_once():
    q = np.ones((2, 3, 4), np.float32)
    p = checks.problem(q, q, q, causal=True, temperature=2.0)
    rule = p.rule()
    assert tuple(rule) == checks.Problem._fields[3:]
    assert tuple(rule.values()) == tuple(p[3:])
    assert rule["causal"] == "bottom-right" and rule["temperature"] == 2.0
