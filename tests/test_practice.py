"""Practice exercises: every kind's answer against an independent computation (hand formulas,
float64 Python/NumPy, torch), determinism per seed, and how answers are read and judged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv import practice
from qkv.practice import AnswerError, check

SEEDS = range(30)
STEP_ORDER = ["scores", "scaled", "tempered", "masked", "weights", "z"]


def exercises(kind):
    return [practice.build(kind, s) for s in SEEDS]


def test_every_topic_has_kinds_and_all_is_their_union():
    assert set(practice.TOPICS) == {"sizes", "scores", "softmax", "masks", "concepts"}
    per_topic = [practice.kinds(t) for t in practice.TOPICS]
    assert all(per_topic)
    assert sorted(sum(per_topic, [])) == sorted(practice.kinds("all")) == sorted(practice.KINDS)


@pytest.mark.parametrize("kind", list(practice.KINDS))
def test_same_seed_same_exercise_other_seeds_differ(kind):
    a, b = practice.build(kind, 11), practice.build(kind, 11)
    assert a == b
    assert a.kind == kind and a.topic == kind.split("/")[0]
    variants = {(e.prompt, e.choices) for e in exercises(kind)}
    assert len(variants) > 1


@pytest.mark.parametrize("kind", list(practice.KINDS))
def test_every_kind_accepts_its_own_expected_answer_and_has_a_solution(kind):
    for ex in exercises(kind)[:10]:
        assert ex.hint and ex.solution and ex.prompt
        if ex.answer_type in ("number", "vector"):
            continue  # the rounded expected text is checked against tolerance below
        assert check(ex, ex.expected_text().split(")")[0].split("  (")[0]).correct


# ---- sizes: hand formulas --------------------------------------------------------------------


def test_d_head_is_d_model_over_heads():
    for ex in exercises("sizes/d_head"):
        d, H = ex.data["d_model"], ex.data["n_heads"]
        assert ex.answer == d // H and d % H == 0
        assert check(ex, str(d // H)).correct and not check(ex, str(d // H + 1)).correct


def test_andrea_120m_d_head_is_64():
    ex = next(
        e
        for e in (practice.build("sizes/d_head", s) for s in range(200))
        if "ANDREA-120M" in e.prompt
    )
    assert (ex.data["d_model"], ex.data["n_heads"]) == (768, 12) and ex.answer == 64


def test_sqrt_d_head():
    for ex in exercises("sizes/sqrt_d_head"):
        want = math.sqrt(ex.data["d_model"] / ex.data["n_heads"])
        assert ex.answer == pytest.approx(want, abs=1e-12)
        assert check(ex, f"{want:.2f}").correct
        assert not check(ex, f"{want + 0.05:.2f}").correct


def test_scores_count_is_T_squared_per_head():
    for ex in exercises("sizes/scores"):
        T, H = ex.data["context"], ex.data["n_heads"]
        assert ex.answer == T * T * (H if ex.data["per_layer"] else 1)


def test_parameters_of_one_layer():
    for ex in exercises("sizes/parameters"):
        d, H, G = ex.data["d_model"], ex.data["n_heads"], ex.data["n_kv_heads"]
        dh = d // H
        assert ex.answer == d * H * dh + 2 * d * G * dh + H * dh * d
        assert check(ex, f"{ex.answer / 1e6:.3f}M").correct or ex.answer < 1e6


def test_parameters_without_grouping_are_4_d_model_squared():
    ex = next(
        e
        for e in (practice.build("sizes/parameters", s) for s in range(100))
        if e.data["n_kv_heads"] == e.data["n_heads"]
    )
    assert ex.answer == 4 * ex.data["d_model"] ** 2


def test_kv_cache_bytes_per_token():
    bytes_of = {"float32": 4, "bfloat16": 2}
    for ex in exercises("sizes/kv_cache"):
        c = ex.data
        assert (
            ex.answer
            == 2
            * c["n_kv_heads"]
            * (c["d_model"] // c["n_heads"])
            * c["layers"]
            * bytes_of[c["dtype"]]
        )


# ---- scores and softmax: float64 Python and torch ----------------------------------------------


def test_dot_score():
    for ex in exercises("scores/dot"):
        q, k = ex.data["q"], ex.data["k"]
        want = sum(a * b for a, b in zip(q, k, strict=False)) / (
            math.sqrt(len(q)) if ex.data["scaled"] else 1
        )
        assert ex.answer == pytest.approx(want, abs=1e-12)
        assert check(ex, f"{want:.2f}").correct


def test_winner_is_torch_argmax():
    torch = pytest.importorskip("torch")
    for ex in exercises("scores/winner"):
        q = torch.tensor(ex.data["q"], dtype=torch.float64)
        K = torch.tensor(ex.data["K"], dtype=torch.float64)
        w = torch.softmax(K @ q / math.sqrt(q.numel()), dim=0)
        best = int(torch.argmax(w))
        assert ex.choices[ex.answer] == ex.data["tokens"][best]
        assert check(ex, "abcd"[best]).correct
        assert not check(ex, "abcd"[(best + 1) % len(ex.choices)]).correct


def test_output_vector_is_torch_sdpa():
    torch = pytest.importorskip("torch")
    for ex in exercises("scores/output"):
        q, K, V = (torch.tensor(ex.data[n], dtype=torch.float64) for n in ("q", "K", "V"))
        z = torch.nn.functional.scaled_dot_product_attention(q[None], K, V)[0]
        np.testing.assert_allclose(ex.answer, z.numpy(), atol=1e-12)
        assert check(ex, " ".join(f"{x:.2f}" for x in z.tolist())).correct
        assert not check(ex, " ".join(f"{x + 0.05:.2f}" for x in z.tolist())).correct


def test_softmax_entry_by_hand():
    for ex in exercises("softmax/softmax"):
        x, tau, j = ex.data["x"], ex.data["tau"], ex.data["j"]
        e = [math.exp(v / tau) for v in x]
        assert ex.answer == pytest.approx(e[j] / sum(e), abs=1e-12)


def test_softmax_2_1_0_example_matches_the_tutorial():
    ex = next(
        e
        for e in (practice.build("softmax/softmax", s) for s in range(400))
        if sorted(e.data["x"]) == [0, 1, 2] and e.data["tau"] == 1
    )
    j = ex.data["j"]
    want = {2.0: 0.665, 1.0: 0.245, 0.0: 0.090}[ex.data["x"][j]]
    assert ex.answer == pytest.approx(want, abs=5e-4)


def test_temperature_limits():
    for ex in exercises("softmax/temperature"):
        x = np.array(ex.data["x"])
        if ex.data["tau_to"] == "0":
            assert ex.choices[ex.answer].startswith("all the weight goes to the largest")
        else:
            assert ex.choices[ex.answer].startswith("every key gets the same weight")
        assert (x == x.max()).sum() == 1  # a unique largest score, so the limit is one-hot


# ---- masks: position comparisons written out -------------------------------------------------


def test_hidden_keys_follow_the_alignment_rule():
    seen = set()
    for ex in [practice.build("masks/hidden", s) for s in range(60)]:
        L, S, i, align = (ex.data[n] for n in ("L", "S", "i", "align"))
        offset = S - L if align == "bottom-right" else 0
        assert ex.answer == tuple(j for j in range(S) if j > i + offset)
        seen.add((align, L != S))
    assert {("bottom-right", True), ("top-left", True)} <= seen


def test_hidden_keys_example_bottom_right():
    ex = next(
        e
        for e in (practice.build("masks/hidden", s) for s in range(300))
        if (e.data["L"], e.data["S"], e.data["align"], e.data["i"]) == (2, 5, "bottom-right", 0)
    )
    assert ex.answer == (4,)  # query 0 is position 3 of 5: it sees keys 0..3
    assert check(ex, "4").correct and not check(ex, "none").correct


def test_empty_rows_and_their_value():
    for ex in exercises("masks/empty_rows"):
        L, S = ex.data["L"], ex.data["S"]
        assert ex.answer == sum(1 for i in range(L) if i + S - L < 0) == L - S
    for ex in exercises("masks/empty_row_value"):
        assert ex.choices[ex.answer] == "its weights are all 0 and its output z is 0"


# ---- concepts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, words",
    [
        ("concepts/key", "matched against"),
        ("concepts/value", "mixed into the output"),
        ("concepts/three", "learned separately"),
        ("concepts/scale", "saturate"),
        ("concepts/masking", "a decoder"),
        ("concepts/symmetric", "symmetric"),
    ],
)
def test_concept_answer_is_the_right_statement(kind, words):
    positions = set()
    for ex in exercises(kind):
        assert words in ex.choices[ex.answer]
        assert sum(words in c for c in ex.choices) == 1
        positions.add(ex.answer)
    assert len(positions) > 1  # the right statement is not always in the same place


def test_pipeline_order():
    for ex in exercises("concepts/order"):
        assert [ex.choices[j].split()[0].rstrip(":") for j in ex.answer] == STEP_ORDER
        assert not check(ex, "abcdef").correct or ex.answer == (0, 1, 2, 3, 4, 5)


# ---- reading answers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("64", 64),
        (" 0.27 ", 0.27),
        ("1/8", 0.125),
        ("1,048,576", 1048576),
        ("2.36M", 2.36e6),
        ("4k", 4000),
        ("-1.5", -1.5),
        ("−1.5", -1.5),
        ("1e3", 1000),
        (".5", 0.5),
    ],
)
def test_numbers_in_several_notations(text, value):
    assert practice.parse_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["abc", "1/0", "inf", "nan", "1..2", "1/2/3", "--1", "0,5"])
def test_bad_numbers_name_what_was_expected(text):
    with pytest.raises(AnswerError, match="expected"):
        practice.parse_number(text)


def test_relative_tolerance_on_large_counts():
    ex = practice.build("sizes/scores", 3)
    assert check(ex, str(ex.answer * 1.004)).correct
    assert not check(ex, str(ex.answer * 1.01)).correct


def test_bad_answers_of_each_type_raise_answer_error():
    by_type = {}
    for kind in practice.KINDS:
        ex = practice.build(kind, 0)
        by_type.setdefault(ex.answer_type, ex)
    cases = {
        "number": ["", "twelve"],
        "choice": ["z", "ab", "1"],
        "keys": ["x", "99", "1 -2"],
        "vector": ["1", "1 2 3", "a b"],
        "order": ["abc", "aabcde", "abcdez"],
    }
    for t, bad in cases.items():
        for text in bad:
            with pytest.raises(AnswerError):
                check(by_type[t], text)


@pytest.mark.parametrize("text", [",", " , ;", "[,]", ";;"])
def test_separators_alone_are_not_keys(text):
    ex = practice.build("masks/hidden", 1)
    with pytest.raises(AnswerError, match="key positions"):
        check(ex, text)


_ANSWER_TEXT = st.text(
    alphabet=st.sampled_from(list("0123456789abcdefz,;.-+/ e[](){}kMG_−\u0661")), max_size=12
) | st.text(max_size=12)


@given(text=_ANSWER_TEXT)
@settings(max_examples=300, deadline=None)
def test_any_text_is_a_verdict_or_an_answer_error(text):
    # one exercise of each answer type: whatever is typed, a verdict or a message, never a crash
    for ex in _ONE_OF_EACH_TYPE:
        try:
            v = check(ex, text)
        except AnswerError as e:
            assert str(e).startswith(("expected", "key positions"))
        else:
            assert isinstance(v.correct, bool) and v.expected == ex.expected_text()


_ONE_OF_EACH_TYPE = list(
    {e.answer_type: e for e in (practice.build(k, 0) for k in practice.KINDS)}.values()
)


def test_keys_accept_several_spellings():
    ex = next(e for e in exercises("masks/hidden") if len(e.answer) >= 2)
    spaced = " ".join(map(str, ex.answer))
    for text in (
        spaced,
        ",".join(map(str, ex.answer)),
        "{" + spaced + "}",
        " ".join(map(str, reversed(ex.answer))),
    ):
        assert check(ex, text).correct
    empty = next(
        e for e in (practice.build("masks/hidden", s) for s in range(100)) if e.answer == ()
    )
    assert check(empty, "none").correct and check(empty, "-").correct


def test_build_and_draw_refuse_bad_arguments():
    with pytest.raises(ValueError, match="unknown exercise kind"):
        practice.build("sizes/nope", 1)
    with pytest.raises(ValueError, match="seed must be an integer"):
        practice.build("sizes/d_head", -1)
    with pytest.raises(ValueError, match="topic must be one of"):
        practice.draw("algebra", 3, 1)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        practice.draw("all", 0, 1)


def test_draw_is_deterministic_and_cycles_through_kinds():
    a, b = practice.draw("masks", 6, seed=5), practice.draw("masks", 6, seed=5)
    assert a == b
    assert {e.kind for e in a[:3]} == set(practice.kinds("masks"))
    assert all(e.topic == "masks" for e in a)
    assert practice.draw("masks", 6, seed=6) != a


@pytest.mark.parametrize("topic", ["all", *practice.TOPICS])
def test_draw_never_repeats_an_exercise(topic):
    for seed in range(4):
        n = 7 if topic == "concepts" else 30  # concepts: one question per kind, 7 kinds
        drawn = practice.draw(topic, n, seed=seed)
        assert len(drawn) == n
        assert len({(e.kind, e.prompt) for e in drawn}) == n
        numbers = [(e.kind, repr(sorted(e.data.items()))) for e in drawn if e.data]
        assert len(set(numbers)) == len(numbers)


def test_draw_refuses_more_exercises_than_a_topic_or_kind_has():
    with pytest.raises(
        ValueError,
        match=r"topic 'concepts' has 7 different exercises; asked "
        r"for 8",
    ):
        practice.draw("concepts", 8, seed=1)
    # masks/empty_row_value has S = 2, 3 or 4 keys: three exercises, then none left
    three = practice.draw("masks", 3, seed=2, kind="masks/empty_row_value")
    assert sorted(e.data["S"] for e in three) == [2, 3, 4]
    with pytest.raises(ValueError, match="kind 'masks/empty_row_value' has 3 different"):
        practice.draw("masks", 4, seed=2, kind="masks/empty_row_value")


def test_public_view_hides_the_answer():
    for kind in practice.KINDS:
        ex = practice.build(kind, 4)
        pub = ex.public()
        assert "answer" not in pub and "solution" not in pub
        assert pub["kind"] == kind and pub["seed"] == 4
