"""qkv.explain.walkthrough on traces that did not come from a scene, and its text helpers."""

import numpy as np
import pytest

import qkv
from qkv.explain.format import Formula, Table, render_markdown, section
from qkv.explain.walkthrough import (
    Section,
    dot_terms,
    fmt,
    labels,
    render_plain,
    select_label,
    vec,
    walkthrough,
)


def text(sections) -> str:
    return render_plain(sections)


def test_a_bare_attention_trace_is_explained_with_index_labels():
    q = np.eye(2)
    k = np.array([[0.0, 1.0], [1.0, 0.0]])
    v = np.array([[2.0, 0.0], [0.0, 3.0]])
    _, trace = qkv.attention(q, k, v, scale=1.0, return_trace=True)
    secs = walkthrough(trace, 0)
    assert all(isinstance(s, Section) and s.title and s.lines for s in secs)
    assert [s.title[:2] for s in secs] == ["2.", "3.", "4.", "5.", "fo"]  # no x: no step 1
    out = text(secs)
    assert "z[0] = [0.54, 2.19]" in out
    assert "q[0]·k[1] = 1.00×1.00 + 0.00×0.00 = 1.00" in out
    assert text(walkthrough(trace, 0, head=0)) == out  # one head: head=0 is that head


def test_a_fully_masked_query_is_said_so_and_prints_no_nan():
    q = k = v = np.arange(6.0).reshape(3, 2)
    mask = np.array([[False, False, False], [True, True, False], [True, True, True]])
    _, trace = qkv.attention(q, k, v, mask=mask, return_trace=True)
    out = text(walkthrough(trace, 0))
    assert "every key is masked for 0: its weights are all 0 and its output is 0" in out
    assert "nan" not in out
    assert "z[0] = [0.00, 0.00]" in out
    assert "masked: 0, 1, 2 set to -inf (the mask hides them)" in out


def test_grouped_query_heads_read_their_shared_kv_head():
    mha = qkv.MultiHeadAttention(8, 4, 7, n_kv_heads=2)
    x = np.random.default_rng(1).normal(size=(5, 8))
    _, trace = mha(x, return_trace=True)
    secs = walkthrough(trace, 4, head=3)  # query head 3 uses K/V head 1
    kv = next(s for s in secs if s.title.startswith("2.")).blocks[-1]
    assert isinstance(kv, Table)
    k_ref = x @ mha.W_K[1]  # (5, d_head)
    assert kv.rows[2][1:3] == (fmt(k_ref[2, 0]), fmt(k_ref[2, 1]))
    terms = trace.contributions(4, head=3)  # (S, d_v)
    assert f"z[4] = {vec(terms.sum(axis=0))}" in text(secs)
    with pytest.raises(ValueError, match=r"head must be in \[0, 4\), got 4"):
        walkthrough(trace, 0, head=4)


def test_batched_traces_are_refused_clearly():
    q = np.ones((2, 1, 3, 4))  # (batch, heads, L, d)
    _, trace = qkv.attention(q, q, q, return_trace=True)
    with pytest.raises(ValueError, match="explains one sequence"):
        walkthrough(trace, 0)


def test_helpers():
    assert dot_terms([1.0, 0.2], [0.5, -1.0]) == "1.00×0.50 + 0.20×(-1.00) = 0.30"
    assert fmt(-0.001) == "0.00" and fmt(float("-inf")) == "-inf"
    assert vec(np.arange(10.0), limit=3) == "[0.00, 1.00, 2.00, … (10 in all)]"
    assert labels(["the", "cat", "the"], 3) == ["the@0", "cat", "the@2"]
    assert labels(None, 2) == ["0", "1"]


def test_sections_keep_tables_in_their_lines_and_markdown_escapes_what_it_must():
    from markdown_it import MarkdownIt

    t = Table(("", "a|b"), (("x_1", "-1.00"),))
    sec = section(
        "demo",
        "before *",
        t,
        Formula("z[0] = 1 + 2 = 3"),
        Formula("y = ```a```"),
        "- not a list",
        "after",
    )
    assert sec.lines == (
        "before *",
        "       a|b",
        "x_1  -1.00",
        "z[0] = 1 + 2 = 3",
        "y = ```a```",
        "- not a list",
        "after",
    )
    md = render_markdown([sec])
    assert "| x\\_1 | -1.00 |" in md and "| a\\|b |" in md
    assert "\n\n| " in md  # a blank line keeps the table apart from the text before it
    assert "````text\nz[0] = 1 + 2 = 3\ny = ```a```\n````" in md  # one block, a longer fence
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<p>before *</p>" in html and "<p>- not a list</p>" in html and "<ul>" not in html
    assert ">x_1</td>" in html and ">a|b</th>" in html
    assert '<pre><code class="language-text">z[0] = 1 + 2 = 3\ny = ```a```\n</code></pre>' in html
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        Table(("a", "b"), (("1",),))


def test_dot_terms_say_when_the_rounded_factors_do_not_give_the_total():
    # 0.333×3 = 0.999, printed 0.33×3.00 = 0.99: the total 1.00 is right, the terms are rounded
    assert dot_terms([1 / 3, 0.0], [3.0, 1.0]) == "0.33×3.00 + 0.00×1.00 ≈ 1.00"
    assert dot_terms([0.5, 0.25], [2.0, 4.0]) == "0.50×2.00 + 0.25×4.00 = 2.00"


def test_the_highest_score_written_out_skips_masked_keys():
    q = np.array([[1.0, 0.0]])
    k = np.array([[0.2, 0.0], [5.0, 0.0], [1.0, 0.0]])  # key 1 scores highest but is hidden
    mask = np.array([[True, False, True]])
    _, trace = qkv.attention(q, k, np.eye(3), mask=mask, return_trace=True)
    out = text(walkthrough(trace, 0))
    assert "term by term, the highest one among the keys it may see:" in out
    assert "q[0]·k[2] = 1.00×1.00 + 0.00×0.00 = 1.00" in out
    _, trace = qkv.attention(q, k, np.eye(3), return_trace=True)
    assert "q[0]·k[1] = 1.00×5.00 + 0.00×0.00 = 5.00" in text(walkthrough(trace, 0))


def test_select_label_reads_token_at_position():
    tokens = ["The", " cat", " sat", " on", " the", " mat"]  # as a BPE tokenizer splits them
    assert select_label(tokens, "␣cat") == 1
    assert select_label(tokens, "the@4") == 4 and select_label(tokens, "␣the@4") == 4
    assert select_label(tokens, "The@0") == 0
    assert select_label(tokens, "cat") is None  # not a label: the caller matches the text
    assert select_label(["a", "@", "b"], "@") == 1 and select_label(["x"], "a@b") is None
    with pytest.raises(ValueError, match=r"'mat@2': position 2 holds '␣sat', not 'mat'"):
        select_label(tokens, "mat@2")
    with pytest.raises(ValueError, match="position 6 is past the last token"):
        select_label(tokens, "mat@6")


def test_the_head_sum_table_says_when_its_rounded_rows_do_not_add_up():
    notes = 0
    for seed in range(6):
        mha = qkv.MultiHeadAttention(6, 3, 5)
        x = np.random.default_rng(seed).normal(scale=20, size=(4, 6))
        _, trace = mha(x, return_trace=True)
        sec = next(s for s in walkthrough(trace, 3) if s.title.startswith("6."))
        table = next(b for b in sec.blocks if isinstance(b, Table))
        cells = np.array([[float(c) for c in r[1:]] for r in table.rows])  # (heads + 2, 6)
        adds_up = [f"{e + 0.0:.2f}" for e in cells[:-1].sum(axis=0)] == list(table.rows[-1][1:])
        noted = any("rounded to 2 decimals, so they may not add up" in line for line in sec.lines)
        assert noted == (not adds_up)
        notes += noted
    assert notes > 0
