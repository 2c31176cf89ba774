"""``python -m qkv.web [--host H] [--port P] [--open]``: the same as ``qkv serve``."""

from qkv.cli.serve import serve

serve(prog_name="python -m qkv.web")
