"""The four kinds of attention head ``qkv.hf.taxonomy`` scores, and what each score measures,
in words: the CLI's help and the page's legend read them from here (no torch needed)."""

from __future__ import annotations

KINDS = ("previous", "first", "duplicate", "induction")
MEANINGS = {
    "previous": "weight on the previous token",
    "first": "weight on the first token (an attention sink)",
    "duplicate": "weight on the earlier copy of the same token",
    "induction": "weight on the token after that earlier copy (an induction head)",
}
