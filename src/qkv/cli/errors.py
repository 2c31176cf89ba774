"""The one error type of the ``qkv`` command: bad input from the user, printed as one line
``Error: …`` with exit status 2 (click's own usage errors use the same status)."""

from __future__ import annotations

import click

EXIT_BAD_INPUT = 2


class CliError(click.ClickException):
    """A bad value from the user: printed as one line 'Error: ...', exit status 2."""

    exit_code = EXIT_BAD_INPUT
