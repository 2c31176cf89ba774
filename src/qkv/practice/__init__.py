"""Practice exercises on attention, generated from a seed and answered by qkv's own engine.

from qkv import practice
ex = practice.build("softmax/softmax", seed=3)
print(ex.prompt); practice.check(ex, "0.24").correct
"""

from qkv.practice.bank import KINDS, TOPICS, build, draw, kinds, pick
from qkv.practice.exercise import AnswerError, Exercise, Verdict, check, parse_number

__all__ = [
    "KINDS",
    "TOPICS",
    "build",
    "draw",
    "kinds",
    "pick",
    "AnswerError",
    "Exercise",
    "Verdict",
    "check",
    "parse_number",
]
