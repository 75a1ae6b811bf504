"""Client-side timeouts for clusters whose nodes run slower than the host.

A VM under software emulation runs 10-30x slower than the host
(``Cluster.time_scale``, measured when the cluster is created).  Its brokers
then take longer than the clients' defaults to acknowledge, join a group or
commit a transaction, although nothing is wrong: on 3 such guests every one
of 60,005 sends outlived its 15 s delivery timeout while the brokers stored
them all.  Brokers scale their own failure detection
(``harness.kafka_config.SCALED_WITH_GUEST_SPEED``); this scales the clients' and the
checker's matching bounds, and records that it did in the run's config.json,
so the checks and the report judge the run by the bounds it really had.
"""

from __future__ import annotations

from typing import Any

# (section, key) of a run config: None is the top level.
CLIENT_TIMEOUTS: tuple[tuple[str | None, str], ...] = (
    ("producer", "request_timeout_ms"),
    ("producer", "delivery_timeout_ms"),
    ("consumer", "session_timeout_ms"),
    ("txn", "transaction_timeout_ms"),
    ("txn", "client_timeout_s"),
    ("checker", "ownership_grace_s"),
    ("checker", "unowned_threshold_s"),
    (None, "final_drain_timeout_s"),
)


def scale_config(config: dict[str, Any], scale: float) -> dict[str, Any]:
    """A copy of run config ``config`` with the client timeouts multiplied by
    ``scale`` and ``guest_time_scale`` set; ``config`` itself when ``scale`` <= 1."""
    if scale <= 1.0:
        return config
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for section, key in CLIENT_TIMEOUTS:
        where = out if section is None else out[section]
        where[key] = type(where[key])(where[key] * scale)
    out["guest_time_scale"] = scale
    return out
