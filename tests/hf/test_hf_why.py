"""The "why this token" panel of a real attribution, shown by ``qkv.show`` and exported by
``to_html`` and ``qkv attribute --html``: its numbers add up to the eager model's own logit
difference, and what cannot be shown is refused with the way to show it."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest
from click.testing import CliRunner
from tiny import build, save_local

import qkv
import qkv.hf
from qkv.cli import main

torch = pytest.importorskip("torch")
CLEAN = torch.tensor([[5, 17, 33, 5, 17, 40, 2]])
CORRUPTED = torch.tensor([[5, 17, 33, 9, 17, 40, 2]])


def embedded(html: str) -> dict:
    """The data an exported file carries (JSON, gzip, base64)."""
    packed = re.search(r'id="qkv-data"[^>]*>([^<]+)<', html)[1]
    return json.loads(gzip.decompress(base64.b64decode(packed)))


@pytest.fixture(scope="module")
def results():
    eager, model = build("llama", attn="eager"), build("llama", attn="qkv")
    with torch.no_grad():
        logits = eager(input_ids=CLEAN).logits[0, -1].double()
    t, b = int(logits.argmax()), int(logits.argmin())
    a = qkv.hf.attribute(model, CLEAN, t, baseline=b, by_key=2)
    p = qkv.hf.patching(model, CLEAN, CORRUPTED, t, baseline=b, residual=False, patterns=False)
    return a, p, float(logits[t] - logits[b])


def test_show_draws_the_panel_whose_shares_add_up(results):
    pytest.importorskip("anywidget", reason="the notebook extra is not installed")
    a, p, want = results
    w = qkv.show(a, patching=p)
    panel = w.panel
    assert w.info["kind"] == "why" and panel["colour"] == "patching"
    s = panel["shares"]
    heads = panel["grids"]["attribution"]["values"]
    assert s["embed"] + sum(map(sum, heads)) + sum(panel["mlp"]) + s["rest"] == pytest.approx(
        want, rel=1e-4
    )
    assert len(panel["splits"]) == 2
    for split in panel["splits"].values():
        layer, head = split["layer"], split["head"]
        assert sum(k["part"] for k in split["keys"]) == pytest.approx(
            heads[layer][head], rel=1e-4, abs=1e-6
        )
    with pytest.raises(TypeError, match=r"qkv.show\(qkv.hf.attribute\(...\), patching="):
        qkv.show(p)
    with pytest.raises(TypeError, match="patching result is shown beside the attribution"):
        qkv.show(qkv.presets.load("bank"), patching=p)


def test_to_html_carries_the_panel(results, tmp_path):
    a, p, _ = results
    path = tmp_path / "why.html"
    text = a.to_html(path, patching=p)
    assert path.read_text(encoding="utf-8") == text
    data = embedded(text)
    assert data["info"]["kind"] == "why"
    assert data["info"]["why"]["grids"]["patching"]["values"] == p.heads.tolist()
    assert data["info"]["why"]["grids"]["attribution"]["values"] == a.heads.tolist()
    assert "<title>qkv · why " in text


def test_qkv_attribute_writes_the_panel_as_html(tmp_path):
    path = tmp_path / "tiny"
    save_local("llama", path, mark="Ġ")
    out = tmp_path / "why.html"
    result = CliRunner().invoke(
        main,
        ["attribute", "--model", str(path), "--text", "w5 w17 w33 w5", "--target", "␣w7"]
        + ["--top", "2", "--html", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    panel = embedded(out.read_text(encoding="utf-8"))["info"]["why"]
    assert panel["target"] == {"token": " w7", "id": 7, "label": "␣w7"}
    assert panel["tokens"] == ["␣w5@0", "␣w17", "␣w33", "␣w5@3"] and len(panel["splits"]) == 2
    bad = CliRunner().invoke(
        main,
        ["attribute", "--model", str(path), "--text", "w5", "--target", "␣w7"]
        + ["--html", str(tmp_path / "missing" / "x.html")],
    )
    last = bad.output.strip().splitlines()[-1]
    assert bad.exit_code == 2 and last.startswith("Error: cannot write"), bad.output
