"""kafka-chaos, the product's top floor: its command line and its runs.

The packages stand in floors, and every import points down:

- ``kafka_chaos``: the ``kafka-chaos`` command index with the cluster,
  dist, elle and run commands, and a run from spec to report (options and
  scenarios, the cluster lease, the run itself, replica verification, suites);
- ``reports``, ``checkers``, ``nemeses``, ``workloads``: what a run is made
  of, each with its own commands (``cli``) for the index to list;
- ``harness``: the ground floor: nodes, backends, clusters and Kafka on
  them, the spec, the run store.

Nothing below imports this package: a lower floor that needs something
from here shows that the thing belongs lower.
"""
