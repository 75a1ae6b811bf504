"""The history as written by clients of a cluster other than the run's first (dc2).

One history holds both data centres.  A line names its cluster through its
topics and groups: dc2's are written ``dc2/<name>`` (``/`` cannot occur in
a Kafka topic name, so the name is unambiguous).  Every check keys
positions by (topic, partition, offset) and members by group, so dc1's
``chaos`` and dc2's ``chaos`` (and the group on each) stay apart with no
check knowing about clusters, while the mirror checks pair them up by the
prefix.

The clients stay as they are: this writer rewrites the encoded lines, so
every client, both client libraries and the final drain get the naming by
being handed this writer instead of the run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_chaos.harness.history import TYPES, HistoryWriter, encode_tail

SEPARATOR = "/"


def qualified(cluster: str, topic: str) -> str:
    return f"{cluster}{SEPARATOR}{topic}"


def split(topic: str) -> tuple[str | None, str]:
    """(cluster, topic) of a history's topic name; None: the run's first cluster."""
    cluster, sep, name = topic.partition(SEPARATOR)
    return (cluster, name) if sep else (None, topic)


class ClusterHistory:
    """A ``HistoryWriter`` for one cluster's clients (or its nemesis): the names of its
    topics, groups and nodes carry the cluster."""

    def __init__(self, history: HistoryWriter, cluster: str, names: Sequence[str]) -> None:
        """``names``: every string this cluster's lines hold whole that must name it."""
        self.inner = history
        self.cluster = cluster
        self._renames = [
            (b'"%s"' % name.encode(), b'"%s"' % qualified(cluster, name).encode()) for name in names
        ]

    @property
    def path(self) -> Path:
        return self.inner.path

    @property
    def start_ns(self) -> int:
        return self.inner.start_ns

    def elapsed_ns(self) -> int:
        return self.inner.elapsed_ns()

    def rename(self, tail: bytes) -> bytes:
        for old, new in self._renames:
            tail = tail.replace(old, new)
        return tail

    def append(self, process: int | str, type_: str, f: str, value: Any) -> dict[str, Any]:
        """As ``HistoryWriter.append``; the returned line keeps the clients' topic names."""
        if type_ not in TYPES:
            raise ValueError(f"unknown op type {type_!r}")
        index, stamp = self.append_encoded((encode_tail(process, type_, f, value),))
        return {"index": index, "time": stamp, "process": process, "type": type_, "f": f,
                "value": value}  # fmt: skip

    def append_encoded(self, tails: Sequence[bytes]) -> tuple[int, int]:
        return self.inner.append_encoded([self.rename(t) for t in tails])

    def close(self) -> None:
        """The run's writer is closed by its owner, not by one cluster's clients."""
