"""All-null columns, sliced from one cached array per type.

Ingest builds each chunk's tables from full schemas, most of whose columns
are null in most rows.  ``pa.nulls`` allocates fresh buffers every time,
and under the conversion's churn each allocation was a run of page faults:
creating a chunk's null columns took 4.4 of the 1e7-op conversion's
seconds (topic_ids.stored alone).  A slice of a longer all-null array is
the same column at no cost (Arrow arrays are immutable, so sharing is safe).
"""

from __future__ import annotations

import threading

import pyarrow as pa

_CACHE: dict[pa.DataType, pa.Array] = {}
_LOCK = threading.Lock()
_MIN_LENGTH = 1 << 16


def nulls(n: int, type_: pa.DataType) -> pa.Array:
    """An array of ``n`` nulls of ``type_`` (a slice of a cached one)."""
    with _LOCK:
        cached = _CACHE.get(type_)
        if cached is None or len(cached) < n:
            cached = pa.nulls(max(n, 2 * len(cached) if cached is not None else _MIN_LENGTH), type_)
            _CACHE[type_] = cached
    return cached.slice(0, n)
