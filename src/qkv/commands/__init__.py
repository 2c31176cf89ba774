"""The ``qkv`` sub-commands, one module each; ``qkv.cli.COMMANDS`` loads them on demand.

Modules here import only click and light parts of qkv at the top; rich, matplotlib and the like
are imported inside the command that needs them.
"""
