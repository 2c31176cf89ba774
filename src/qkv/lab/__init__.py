"""Experiments that check the tutorials' claims with numbers, and a Mini-GPT trained on agreement."""
