"""The product's package graph at a revision, from its own imports: a picture to compare.

    python3 bench/structure.py REV [REV ...] [--mermaid DIR]

Issue 47 asks for the structure before and after, side by side.  This reads
every tracked ``*.py`` of each revision straight from git (``git show``; the
work tree is left alone), as tests/unit/test_layers.py reads the work tree:
an import of ``kafka_chaos.harness...`` or of ``harness...`` (before the
namespace) lands in the package ``harness``.  Imports made by name at run time
(``importlib``, "module:function" in a declaration) are not imports here.

Prints, per revision: the packages with their files and lines, every arrow
between two packages with how many imports make it, each package's floor (one
above the highest floor it imports; the ground floor is 0), the arrows that
climb against test_layers' floors, and the cycles (package and module level).
``--mermaid DIR`` also writes DIR/<rev>.md, the graph as a Mermaid diagram
(GitHub draws it).  ``-`` as a REV reads the work tree.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("harness", "workloads", "nemeses", "checkers", "forensics", "reports", "kafka_chaos")
BESIDE = ("testkit", "bench")  # drawn too: what leans on the product from beside it
# test_layers' floors at issue 47's close: peers share a floor and must not import each other.
DESIGN = {"harness": 0, "workloads": 1, "nemeses": 1, "checkers": 2, "forensics": 2,
          "reports": 3, "kafka_chaos": 4}  # fmt: skip


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def sources(rev: str) -> dict[str, str]:
    """Every tracked .py file of ``rev`` (``-``: the work tree) by path."""
    if rev == "-":
        names = git("ls-files", "*.py").split()
        return {n: (REPO / n).read_text(encoding="utf-8") for n in names if (REPO / n).is_file()}
    names = git("ls-tree", "-r", "--name-only", rev).split()
    return {n: git("show", f"{rev}:{n}") for n in names if n.endswith(".py")}


def package_of(module: str, packages: set[str]) -> str | None:
    parts = module.split(".")
    if parts[0] == "kafka_chaos" and len(parts) > 1 and parts[1] in packages:
        return parts[1]
    return parts[0] if parts[0] in packages else None


def module_of(path: str) -> str:
    """``checkers/queue/x.py`` -> ``checkers.queue.x`` (the namespace prefix dropped)."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imports(path: str, text: str, modules: set[str]) -> list[str]:
    """The absolute modules ``text`` imports, ``kafka_chaos.`` dropped before a package;
    ``from pkg import sub`` of a submodule names ``pkg.sub`` (of ``modules``) alone."""
    out = []
    try:
        tree = ast.parse(text, path)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        short = [_short(m) for m in found]
        if isinstance(node, ast.ImportFrom) and all(m in modules for m in short[1:]):
            short = short[1:]  # every name is a submodule: the package face is not the point
        out += [m for m in short if m]
    return out


def _short(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "kafka_chaos" and len(parts) > 1 and parts[1] in (*PRODUCT, *BESIDE):
        return ".".join(parts[1:])
    return module


def floors(arrows: dict[tuple[str, str], int], packages: list[str]) -> dict[str, int]:
    """One above the highest floor a package imports (cycles: None)."""
    memo: dict[str, int] = {}

    def floor(p: str, seen: tuple[str, ...]) -> int:
        if p in memo:
            return memo[p]
        if p in seen:
            return -1
        below = [floor(b, (*seen, p)) for (a, b) in arrows if a == p]
        memo[p] = 1 + max(below, default=-1)
        return memo[p]

    return {p: floor(p, ()) for p in packages}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def measure(rev: str) -> dict:
    files = sources(rev)
    drawn = set(PRODUCT) | set(BESIDE)
    size: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    arrows: dict[tuple[str, str], int] = defaultdict(int)
    modules = {module_of(p) for p in files}
    module_edges: dict[str, set[str]] = defaultdict(set)
    for path, text in files.items():
        own = path.split("/")[0]
        if own not in drawn:
            continue
        size[own][0] += 1
        size[own][1] += text.count("\n")
        targets = set()
        for m in imports(path, text, modules):
            target = package_of(m, drawn)
            if target is not None and target != own:
                targets.add(target)
            if m in modules and own in PRODUCT and m.split(".")[0] in PRODUCT:
                module_edges[module_of(path)].add(m)
        for target in targets:
            arrows[(own, target)] += 1  # files of ``own`` that import ``target``
    product_arrows = {k: v for k, v in arrows.items() if k[0] in PRODUCT and k[1] in PRODUCT}
    climbs = [f"{a} -> {b}" for (a, b) in product_arrows
              if a in DESIGN and b in DESIGN and DESIGN[b] >= DESIGN[a]]  # fmt: skip
    pkg_edges: dict[str, set[str]] = defaultdict(set)
    for a, b in product_arrows:
        pkg_edges[a].add(b)
    return {
        "rev": rev,
        "commit": git("rev-parse", "--short", rev).strip() if rev != "-" else "work tree",
        "size": dict(size),
        "arrows": dict(arrows),
        "floors": floors(product_arrows, [p for p in PRODUCT if p in size]),
        "climbs": climbs,
        "package_cycles": cycles(pkg_edges),
        "module_cycles": cycles(module_edges),
    }


def show(m: dict) -> None:
    print(f"== {m['rev']} ({m['commit']})")
    product = [p for p in PRODUCT if p in m["size"]]
    for p in sorted(product, key=lambda p: -m["floors"][p]):
        files, lines = m["size"][p]
        print(f"  floor {m['floors'][p]}  {p:<12} {files:>4} files {lines:>7} lines")
    for p in BESIDE:
        if p in m["size"]:
            print(f"  beside   {p:<12} {m['size'][p][0]:>4} files {m['size'][p][1]:>7} lines")
    inner = sorted((k, v) for k, v in m["arrows"].items() if k[0] in PRODUCT and k[1] in PRODUCT)
    print(f"  product packages {len(product)}, floors {len(set(m['floors'].values()))}, "
          f"arrows between them {len(inner)} (all arrows, testkit and bench too: "
          f"{len(m['arrows'])})")  # fmt: skip
    for (a, b), n in inner:
        print(f"    {a} -> {b}  ({n} files of {a} import it)")
    print(f"  climbing against the design's floors: {m['climbs'] or 'none'}")
    print(f"  package cycles: {m['package_cycles'] or 'none'}; "
          f"module cycles: {m['module_cycles'] or 'none'}")  # fmt: skip


def mermaid(m: dict) -> str:
    """The graph as a Mermaid flowchart, top floor first."""
    lines = [f"# Package graph at {m['commit']}", "",
             "Written by `python3 bench/structure.py " + m["rev"] + " --mermaid DIR`; "
             "an arrow A --> B: A imports B (the number: files of A that do).", "",
             "```mermaid", "flowchart TD"]  # fmt: skip
    for p in sorted(m["size"], key=lambda p: -m["floors"].get(p, 99)):
        files, n = m["size"][p]
        floor = m["floors"].get(p)
        label = f"{p}/<br/>{n} lines" + (f", floor {floor}" if floor is not None else ", beside")
        lines.append(f'  {p}["{label}"]')
    for (a, b), n in sorted(m["arrows"].items()):
        lines.append(f"  {a} -->|{n}| {b}")
    lines += ["```", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("revs", nargs="+")
    parser.add_argument("--mermaid", type=Path)
    args = parser.parse_args()
    for rev in args.revs:
        try:
            m = measure(rev)
        except subprocess.CalledProcessError as e:
            print(f"{rev}: not a revision here ({e.stderr.strip()})", file=sys.stderr)
            return 2
        show(m)
        if args.mermaid:
            args.mermaid.mkdir(parents=True, exist_ok=True)
            (args.mermaid / f"{m['commit'].replace(' ', '-')}.md").write_text(mermaid(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
