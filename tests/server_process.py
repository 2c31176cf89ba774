"""A server started as a process of its own, as a user starts it, for the tests that check what
it prints and serves."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess

URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


@contextlib.contextmanager
def server_process(argv, *, stop=signal.SIGTERM, **popen):
    """Start ``argv``, wait for the URL it prints first (http://127.0.0.1:PORT) and yield
    (process, that URL without a trailing slash); afterwards send it ``stop`` and fail if it
    has not ended within 30 s."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )
    try:
        line = proc.stdout.readline()
        found = URL.search(line)
        if not found:
            said = proc.stderr.read()[-1500:] if proc.poll() is not None else ""
            raise AssertionError(f"{argv} printed {line!r}, not its URL; stderr: {said}")
        yield proc, found.group(0)
    finally:
        proc.send_signal(stop)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"{argv} did not stop on {stop.name} within 30 s") from None
