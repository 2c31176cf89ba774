"""What a widget puts on the wire: a comm that keeps every message the kernel side publishes
(the comm package's own ``DummyComm`` publishes nothing), sized as the kernel sends them —
the JSON that ``jupyter_client`` packs plus the binary buffers."""

from __future__ import annotations

import comm
from comm import DummyComm
from jupyter_client.session import json_packer


class RecordingComm(DummyComm):
    """A comm that records (message type, data, buffers) of every message it publishes."""

    sent: list = []  # replaced per instance in __init__

    def __init__(self, *args, **kwargs):
        self.sent = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        self.sent.append((msg_type, data, list(buffers or [])))


def size(message) -> int:
    """Bytes of one recorded message: its packed JSON and its buffers."""
    _, data, buffers = message
    return len(json_packer(data)) + sum(memoryview(b).nbytes for b in buffers)


def recording(monkeypatch):
    """Widgets made after this call publish through a ``RecordingComm``."""
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


def sent_since(widget, start: int) -> int:
    """Bytes the widget published after its first ``start`` messages."""
    return sum(size(m) for m in widget.comm.sent[start:])
