"""qkv.views.why: the "why this token" panel from an attribution's and a patching's dicts, on
numbers small enough to check by hand (no model, no torch)."""

from __future__ import annotations

import pytest

from qkv.views import why

TOKENS = ["When", " Mary", " and", " Mary", " to"]


def attribution(**changes) -> dict:
    """An Attribution.to_dict() of 2 layers × 3 heads whose shares add up to 2.5."""
    a = {
        "tokens": TOKENS,
        "position": 4,
        "target": {"token": " Mary", "id": 11},
        "baseline": {"token": " John", "id": 12},
        "logit_diff": 2.5,
        "embed": 0.25,
        "heads": [[0.5, -1.5, 0.0], [2.0, 0.25, -0.5]],  # sum 0.75
        "mlp": [1.0, 0.75],
        "rest": -0.25,
        "rest_parts": {"attention biases": -0.25},
        "by_key": [
            {
                "layer": 1,
                "head": 0,
                "value": 2.0,
                "weights": [0.1, 0.6, 0.0, 0.3, 0.0],
                "parts": [0.25, 1.5, 0.0, 0.5, -0.25],
            }
        ],
    }
    return a | changes


def patching(**changes) -> dict:
    p = {
        "tokens": TOKENS,
        "corrupted_tokens": ["When", " John", " and", " Mary", " to"],
        "position": 4,
        "target": {"token": " Mary", "id": 11},
        "baseline": {"token": " John", "id": 12},
        "clean": 2.5,
        "corrupted": -1.0,
        "heads": [[0.1, 0.0, -0.2], [0.9, 0.05, 0.3]],
        "residual": None,
        "patterns": None,
    }
    return p | changes


def test_the_grid_its_scale_and_the_shares_by_hand():
    p = why.panel(attribution())
    assert p["shape"] == [2, 3] and p["colour"] == "attribution"
    assert p["grids"]["attribution"]["values"] == [[0.5, -1.5, 0.0], [2.0, 0.25, -0.5]]
    assert p["grids"]["attribution"]["range"] == [-2.0, 2.0]  # max |share| on both sides
    assert p["shares"] == {"embed": 0.25, "heads": 0.75, "mlp": 1.75, "rest": -0.25, "total": 2.5}
    assert p["quantity"] == "logit(␣Mary) − logit(␣John)"
    assert p["target"] == {"token": " Mary", "id": 11, "label": "␣Mary"}
    # the repeated token is named by its position, as every surface names it
    assert p["tokens"] == ["When", "␣Mary@1", "␣and", "␣Mary@3", "␣to"]
    assert p["patching"] is None and list(p["grids"]) == ["attribution"]


def test_the_top_heads_by_size_whatever_the_sign():
    p = why.panel(attribution(), top=3)
    assert [(t["layer"], t["head"], t["attribution"]) for t in p["top"]] == [
        (1, 0, 2.0),
        (0, 1, -1.5),
        (0, 0, 0.5),
    ]
    assert all(t["patching"] is None for t in p["top"])


def test_a_heads_split_by_key_with_labels_and_its_weights_row():
    s = why.panel(attribution())["splits"]["1.0"]
    assert (s["layer"], s["head"], s["value"], s["sum"]) == (1, 0, 2.0, 2.0)
    assert [(k["key"], k["token"], k["weight"], k["part"]) for k in s["keys"]] == [
        (0, "When", 0.1, 0.25),
        (1, "␣Mary@1", 0.6, 1.5),
        (2, "␣and", 0.0, 0.0),
        (3, "␣Mary@3", 0.3, 0.5),
        (4, "␣to", 0.0, -0.25),
    ]
    assert s["range"] == [-1.5, 1.5]


def test_patching_colours_the_grid_and_ranks_the_heads():
    p = why.panel(attribution(), patching(), top=2)
    assert p["colour"] == "patching" and list(p["grids"]) == ["attribution", "patching"]
    assert p["grids"]["patching"]["range"] == [-0.9, 0.9]
    assert [(t["layer"], t["head"], t["patching"], t["attribution"]) for t in p["top"]] == [
        (1, 0, 0.9, 2.0),
        (1, 2, 0.3, -0.5),
    ]
    assert p["patching"]["clean"] == 2.5 and p["patching"]["corrupted"] == -1.0
    assert p["patching"]["corrupted_tokens"][1] == "␣John"


def test_an_all_zero_grid_still_has_a_scale():
    p = why.panel(attribution(heads=[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], by_key=[]))
    assert p["grids"]["attribution"]["range"] == [-1.0, 1.0] and p["splits"] == {}


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"target": {"token": " John", "id": 12}}, "its target differs"),
        ({"position": 3}, "its position differs"),
        ({"heads": [[0.1, 0.2, 0.3]]}, "the attribution's shape (2, 3), got (1, 3)"),
    ],
)
def test_a_patching_of_another_question_is_refused(changes, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        why.panel(attribution(), patching(**changes))


def test_what_is_not_an_attribution_is_refused():
    with pytest.raises(TypeError, match="qkv.hf.attribute"):
        why.panel({"tokens": TOKENS})
    with pytest.raises(TypeError, match=r"patching=qkv.hf.patching"):
        why.check_not_patching(patching(), None)
    assert why.is_attribution(attribution()) and not why.is_attribution(patching())
    assert why.is_patching(patching()) and not why.is_patching(attribution())
    bad = attribution(by_key=[{**attribution()["by_key"][0], "parts": [1.0]}])
    with pytest.raises(ValueError, match="1 parts"):
        why.panel(bad)
