"""kafka-chaos, the product's top floor: its command line and its runs.

The packages stand in floors, and every import points down:

- ``kafka_chaos``: the ``kafka-chaos`` command index with the cluster,
  dist, elle and run commands, and a run from spec to report (options and
  scenarios, the cluster lease, the run itself, replica verification, suites);
- ``reports``, ``checkers``, ``nemeses``, ``workloads``: what a run is made
  of, each with its own commands (``cli``) for the index to list;
- ``harness``: the ground floor: nodes, backends, clusters and Kafka on
  them, the spec, the run store.

Nothing below imports this package's own modules: a lower floor that needs
something from here shows that the thing belongs lower.

Every package installs under this one's name (``kafka_chaos.harness``, ...),
so that generic names such as ``harness`` or ``reports`` never collide with
another distribution's.  An installed wheel holds them inside this package
(pyproject.toml's package-dir); a checkout keeps the design's folders beside
it, so there this package's path takes in the checkout's root as well.
"""

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "harness" / "__init__.py").is_file() and str(_CHECKOUT) not in __path__:
    __path__.append(str(_CHECKOUT))
