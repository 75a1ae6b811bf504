"""Errors the harness reports to users.

Every error a user can cause (bad config, missing root, unreachable node,
unfetchable Kafka version) is a ``HarnessError`` whose message names the
problem; the CLI prints it without a traceback and exits with code 3.
"""


class HarnessError(Exception):
    """A problem the user can act on; the message says what and where."""


class ConfigError(HarnessError):
    """A malformed or contradictory configuration, suite or inventory."""


class PrivilegeError(HarnessError):
    """The local backend needs root and kernel features this process lacks."""


class NodeUnreachable(HarnessError):
    """SSH to a node failed or timed out."""


class CommandFailed(HarnessError):
    """A command on a node exited non-zero."""


class KafkaFetchError(HarnessError):
    """A Kafka distribution could not be assembled from Maven Central."""


class HistoryError(HarnessError):
    """A history file has a malformed line; the message names the line."""


class ElleResolveError(HarnessError):
    """Elle's jars (Clojars only) could not be resolved with Maven."""
