"""What checks the checkers: reference twins and synthetic-history generators.

Why this exists: these modules used to ship inside ``checkers/`` and
``nemeses/`` although nothing the product runs imports them, and the
fault-schedule strategies, shipped in ``nemeses/``, made Hypothesis (and
with it pytest) runtime dependencies (issue 31).  They are here instead,
outside the installed packages (``[tool.setuptools] packages`` in
pyproject.toml does not list ``testkit``, and must not):

- ``reference*``: the checks' definitions in plain Python, the twins the
  Spark checks must agree with (queue, reads, transactions, cycles, share
  groups, statistics);
- ``synthetic*``: generators of valid (and deliberately broken) histories
  for the property tests and the benchmarks;
- ``strategies``: Hypothesis strategies for fault schedules and the model
  cluster they run on;
- ``class_archive_build``: builds the JVM class archive that
  ``checkers.class_archive`` loads, by judging a synthetic history
  (``setup.sh`` runs ``python3 -m testkit.class_archive_build``).

Used by ``tests/`` (pytest puts the checkout on ``sys.path``:
``pythonpath`` in pyproject.toml), by ``bench/`` (each script that imports it puts the checkout on
``sys.path`` itself) and by ``setup.sh`` (run from the checkout).  Its
dependencies, Hypothesis and pytest, are in the ``dev`` extra.
"""
