"""qkv export: writes one self-contained HTML file; bad input is one line and exit status 2."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest
from click.testing import CliRunner

import qkv
from qkv.cli import main


def data_of(path) -> dict:
    """The numbers an exported file holds (JSON, gzip, base64 in its data element)."""
    text = path.read_text()
    packed = re.search(
        r'<script type="application/octet-stream" id="qkv-data"[^>]*>([^<]*)<', text
    )[1]
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def test_export_a_preset(tmp_path):
    out = tmp_path / "bank.html"
    r = CliRunner().invoke(
        main,
        [
            "export",
            "--preset",
            "bank",
            "--select",
            "bank",
            "--temperature",
            "1",
            "--temperature",
            "0.5",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output
    text = out.read_text()
    assert "<script src" not in text and '<link rel="stylesheet"' not in text
    # nothing to fetch: the only URL is MathML's namespace name (an identifier, never loaded)
    assert set(re.findall(r"https?://[^\s\"']+", text)) == {"http://www.w3.org/1998/Math/MathML"}
    data = data_of(out)
    assert data["start"]["select"] == 4 and data["info"]["tau"]["values"] == [1.0, 0.5]
    assert len(data["rows"]) == 2 * 8  # τ values × tokens
    sc = qkv.presets.load("bank")
    ref = sc.trace(temperature=0.5).weights
    row = data["rows"]["1|0|0|4"]
    assert data["traces"][row["trace"]]["steps"]["weights"]["data"] == ref.tolist()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "bank", "--select", "nope"], "select must be a token index 0-7"),
        (["--preset", "bank", "--temperature", "-1"], "--temperature must be a finite number > 0"),
        (["--model", "minilm-l6"], "--model needs --text"),
        (["--preset", "bank", "--model", "minilm-l6", "--text", "hi"], "exclude each other"),
        (["--preset", "bank", "--layer", "2"], "--text and --layer go with --model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    r = CliRunner().invoke(main, ["export", *args, "-o", str(tmp_path / "x.html")])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: ") and message in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


def test_unwritable_output_is_an_error(tmp_path):
    r = CliRunner().invoke(main, ["export", "-o", str(tmp_path / "missing" / "x.html")])
    assert r.exit_code == 2 and r.output.startswith("Error: cannot write")


@pytest.mark.slow
def test_export_a_model_run_with_chosen_layers(tmp_path, minilm, monkeypatch):
    monkeypatch.setattr("qkv.cli.common.load_model", lambda name: minilm)
    out = tmp_path / "run.html"
    r = CliRunner().invoke(
        main,
        [
            "export",
            "--model",
            "minilm-l6",
            "--text",
            "The bank raised its rates",
            "--layer",
            "2",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    data = data_of(out)
    L = len(data["scene"]["tokens"])
    assert data["info"]["layers"] == [2] and len(data["rows"]) == 12 * L
    assert data["start"] == {"select": L - 1, "temperature": 1.0, "head": 0, "layer": 2}
    run = minilm.trace("The bank raised its rates")
    row = data["rows"][f"0|2|5|{L - 1}"]
    got = data["traces"][row["trace"]]["steps"]["weights"]
    assert got["dtype"] == "float32"
    # float32 numbers written with float32's shortest digits read back to the same float32s
    import numpy as np

    assert np.array_equal(np.array(got["data"], dtype=np.float32), run.layer(2).weights[5])
    with pytest.raises(ValueError, match=r"layer must be one of \[2\]"):
        from qkv.notebook.export import to_html

        to_html(minilm.trace("hi", layers=[2]), layer=0)
