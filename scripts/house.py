"""Write `docs/operations/house.md`, the library's packages floor by floor, from the code:
each package's modules and lines, the imports between packages (the arrows), those that
run back up a floor, and the circles between modules.

The order of the packages, bottom to top, is declared here (`ORDER`); a package imports
only packages below it, but for at most 2 arrows (`MAX_CLIMBS`). A package's floor is
1 + the highest floor of what it imports (the arrows that climb left out), so the ground
floor imports nothing of ackfold. An import counts at any depth of its module's code
(inside a function, or under `TYPE_CHECKING`); `from ackfold.x import y` names the
module `ackfold.x.y` when there is one.

    python scripts/house.py                    # rewrite the page
    python scripts/house.py --check            # exit 1 if the page differs from the code
    python scripts/house.py --include DIR      # measure another tree's include/ (print)

`tests/unit/test_layout.py` holds the order and the page against the code.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
PAGE = PROJECT / "docs" / "operations" / "house.md"
TOP = "__init__"  # `ackfold/__init__.py`, the public face, is a node of its own
MAX_CLIMBS = 2

# Bottom to top. A package imports only what stands before it here, but for the arrows
# that climb (at most MAX_CLIMBS).
ORDER: tuple[str, ...] = (
    "errors",
    "lazy",
    "progress",
    "version",
    "config",
    "ledger",
    "metrics",
    "alerts",
    "embedded",
    "track",
    "spark",
    "sources",
    "reconcile",
    "replay",
    "effects",
    "quality",
    "engines",
    "runs",
    "maintenance",
    "ui",
    "demo",
    "jobs",
    TOP,
    "airflow",
    "cli",
)

# The figures of main before issue 59's import graph work (49b6ac7), measured with this
# script and the same ORDER (`runs` did not exist).
BEFORE = {"packages": 24, "arrows": 127, "climbs": 5, "circles": 0}


@dataclass
class House:
    """The packages of one tree's `include/ackfold`, and the imports between them."""

    modules: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> module: lines
    arrows: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    circles: list[str] = field(default_factory=list)

    def lines(self, node: str) -> int:
        return sum(self.modules[node].values())

    def climbs(self, order: Sequence[str] = ORDER) -> dict[tuple[str, str], list[str]]:
        """The arrows from a package to one above it in `order` (a package `order` does
        not name stands above all: every import of it climbs)."""
        rank = {name: i for i, name in enumerate(order)}
        top = len(order)
        return {
            (a, b): why
            for (a, b), why in sorted(self.arrows.items())
            if rank.get(b, top) > rank.get(a, top) or a not in rank
        }

    def floors(self, order: Sequence[str] = ORDER) -> dict[str, int]:
        """Each package's floor: 1 + the highest floor it imports, climbs left out."""
        climbing = set(self.climbs(order))
        below: dict[str, set[str]] = defaultdict(set)
        for a, b in self.arrows:
            if (a, b) not in climbing:
                below[a].add(b)
        floor: dict[str, int] = {}
        for name in [n for n in order if n in self.modules]:
            floor[name] = 1 + max((floor.get(b, 0) for b in below[name]), default=0)
        return floor


def _node(module: str) -> str:
    parts = module.split(".")
    return TOP if len(parts) == 1 else parts[1]


def _module_name(path: Path, include: Path) -> str:
    parts = path.relative_to(include).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(include: Path) -> dict[str, set[str]]:
    """Each module of `include/ackfold` and the modules of ackfold it imports, at any depth
    of its code (an import inside a function, or under TYPE_CHECKING, ties the modules all
    the same): `from ackfold.x import y` names the module `ackfold.x.y` when there is one."""
    files = _files(include)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for statement in ast.walk(ast.parse(path.read_text())):
            if isinstance(statement, ast.ImportFrom) and statement.level == 0:
                base = statement.module or ""
                for alias in statement.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else base)
            elif isinstance(statement, ast.Import):
                targets.update(a.name for a in statement.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def _files(include: Path) -> dict[str, Path]:
    return {_module_name(p, include): p for p in sorted((include / "ackfold").rglob("*.py"))}


def measure(include: Path) -> House:
    """The house of `include/ackfold` under `include`."""
    files = _files(include)
    graph = module_graph(include)
    house = House()
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, path in files.items():
        house.modules.setdefault(_node(name), {})[name] = len(path.read_text().splitlines())
        for target in sorted(graph[name]):
            if _node(target) != _node(name):
                arrows[(_node(name), _node(target))].append(f"{name} -> {target}")
    house.arrows = dict(sorted(arrows.items()))
    faces = {name for name, path in files.items() if path.name == "__init__.py"}
    house.circles = circles(graph, faces)
    return house


def circles(graph: dict[str, set[str]], faces: set[str]) -> list[str]:
    """The modules that import each other in a loop. A package's face (`__init__.py`)
    hands its names on, so an import of it is no tie."""
    edges = {name: graph[name] - faces for name in graph if name not in faces}
    found: list[str] = []
    done: set[str] = set()
    for start in sorted(edges):
        path, on_path = [start], {start}
        stack = [iter(sorted(edges[start]))]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
                on_path.discard(path.pop())
            elif following == start:
                found.append(" -> ".join([*path, start]))
            elif following not in on_path and following not in done:
                path.append(following)
                on_path.add(following)
                stack.append(iter(sorted(edges[following])))
        done.add(start)
    return found


def figures(house: House) -> dict[str, int]:
    return {
        "packages": len(house.modules),
        "arrows": len(house.arrows),
        "climbs": len(house.climbs()),
        "circles": len(house.circles),
    }


def page(house: House) -> str:
    """The Markdown page of `house`."""
    now = figures(house)
    floor = house.floors()
    out = [
        "# The house: packages by floor",
        "",
        "<!-- Written by scripts/house.py from the code; tests/unit/test_layout.py checks"
        " it is current. Do not edit by hand: run `python scripts/house.py`. -->",
        "",
        "The library's packages (`include/ackfold/`), each on its floor: a package stands"
        " above every package it imports, so the ground floor imports nothing of ackfold."
        " An *arrow* is a package importing another (any number of imports, at any depth"
        " of the code); an arrow that *climbs* runs from a package to one above it in the"
        " declared order (`ORDER` in `scripts/house.py`); a *circle* is modules that"
        " import each other in a loop. How the packages meet: [Development and tests]"
        "(development.md).",
        "",
        "| figure | before (issue 59) | now |",
        "|---|---:|---:|",
        f"| packages | {BEFORE['packages']} | {now['packages']} |",
        f"| arrows between packages | {BEFORE['arrows']} | {now['arrows']} |",
        f"| arrows that climb a floor | {BEFORE['climbs']} | {now['climbs']} |",
        f"| circles of modules | {BEFORE['circles']} | {now['circles']} |",
        "",
        "Before, each verb's run function chose its engine in the verb's own package"
        " (`reconcile/run.py`, `replay/run.py`, `replay/replayer.py`, `quality/run.py`),"
        " and the engines called that package's code (the embedded fold, the Spark"
        " reconciler, the checks): `engines/` and `reconcile/`, `replay/`, `quality/`"
        " imported each other: 3 of the 5 climbs. The runs now stand above the engines,"
        " in `runs/`, and the verbs' packages keep the code the engines call. The two"
        " climbs left: `ackfold.spark.apps`, the deprecated name of the Spark jobs'"
        " entry points, hands them on from `ackfold.jobs` until its removal; and a"
        " tracked app's writes (`track/write.py`) ask whether its session is Spark"
        " Connect, while a session started by `ackfold.spark` installs the app's"
        " heartbeat (`track/heartbeat.py`).",
        "",
        "## Floors, top to bottom",
        "",
        "| floor | package | modules | lines | largest module | imports (packages) |",
        "|---:|---|---:|---:|---|---|",
    ]
    for name in sorted(floor, key=lambda n: (-floor[n], ORDER.index(n))):
        label = "`ackfold/__init__.py`" if name == TOP else f"`{name}`"
        below = sorted({b for a, b in house.arrows if a == name}, key=ORDER.index)
        largest = max(house.modules[name].items(), key=lambda item: item[1])
        out.append(
            f"| {floor[name]} | {label} | {len(house.modules[name])} | {house.lines(name)} "
            f"| {largest[0].split('.')[-1]} ({largest[1]}) | {', '.join(below) or '—'} |"
        )
    climbs = house.climbs()
    out += ["", f"## The arrows that climb ({len(climbs)}, at most {MAX_CLIMBS})", ""]
    for (a, b), why in climbs.items():
        out.append(f"- `{a}` → `{b}`: {', '.join(f'`{w}`' for w in why)}")
    if not climbs:
        out.append("None.")
    out += ["", "## Circles of modules", ""]
    out += [f"- {c}" for c in house.circles] or ["None."]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--include", type=Path, help="print the figures of another include/")
    args = parser.parse_args(argv)
    if args.include:
        house = measure(args.include)
        print(figures(house))
        for (a, b), why in house.climbs().items():
            print(f"climbs: {a} -> {b}: {', '.join(why)}")
        return 0
    text = page(measure(PROJECT / "include"))
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(PROJECT)} is stale: run python scripts/house.py")
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
