"""Pre-encoded history lines for a producer's sends: the recorder's hot path.

An unpaced producer records two lines per message (the invoke and its
completion), so encoding them is on the critical path of every send.  The
frequent lines (``invoke`` and ``ok``) are ``%``-templates with the process,
topic and field names encoded once per producer process; they are
byte-identical to ``history.encode_tail`` of the same op, which the unit
tests check.  Rare lines (failures, recorder errors) go through
``encode_tail``.
"""

from __future__ import annotations

import orjson
from kafka_chaos.harness.history import encode_tail


class SendLines:
    """Encoded tails (see ``HistoryWriter.append_encoded``) of one process's send lines.

    Keys are the decimal digits of ``values.key_and_partition``, so they are
    inserted without JSON escaping; the topic is JSON-encoded once.  The
    producer's loops use ``invoke_format`` and ``ok_format`` directly (a method
    call per line costs as much as the formatting); the methods say what
    goes where.
    """

    def __init__(self, process: int, topic: str) -> None:
        self.process = process
        self.topic = topic
        prefix = b'"process":%d,"type":' % process
        # Escape "%" so a topic name can never be read as a format directive.
        fields = b'"f":"send","value":{"topic":' + orjson.dumps(topic).replace(b"%", b"%%")
        self.invoke_format = prefix + b'"invoke",' + fields + b',"key":"%b","value":%d}}\n'
        self.ok_format = (
            prefix + b'"ok",' + fields + (b',"key":"%b","value":%d,"partition":%d,"offset":%d}}\n')
        )

    def invoke(self, key: bytes, value: int) -> bytes:
        """``{"topic", "key", "value"}`` of a send about to be produced."""
        return self.invoke_format % (key, value)

    def ok(self, key: bytes, value: int, partition: int, offset: int) -> bytes:
        """The broker's acknowledgement with the offset it assigned."""
        return self.ok_format % (key, value, partition, offset)

    def other(self, type_: str, key: str, value: int, **fields: object) -> bytes:
        """Any other completion (``fail``/``info`` with an ``error``): the slow, general path."""
        op = {"topic": self.topic, "key": key, "value": value, **fields}
        return encode_tail(self.process, type_, "send", op)
