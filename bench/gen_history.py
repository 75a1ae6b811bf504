"""Write a synthetic history of N operations (testkit/synthetic.py) for checker benchmarks.

python bench/gen_history.py 1000000 /tmp/h1e6.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # testkit is not installed
from testkit.synthetic import generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", type=float, help="number of operations, e.g. 1e6")
    parser.add_argument("path", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    t0 = time.monotonic()
    n = generate(int(args.ops), args.path, args.seed)
    took = time.monotonic() - t0
    size = args.path.stat().st_size / 1e6
    print(f"wrote {n} ops ({size:.0f} MB) to {args.path} in {took:.1f} s ({n / took:,.0f} ops/s)")


if __name__ == "__main__":
    main()
