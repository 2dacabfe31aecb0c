"""The package's layout, checked against its picture in docs/operations/development.md:
every package of `include/ackfold` stands in exactly one layer, no module sits outside a
package but the bottom layer (`errors.py`, `lazy.py`, `progress.py`, `version.py`), no
import climbs a layer, and
no private name is imported across modules."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import PROJECT_DIR

PACKAGE = PROJECT_DIR / "include" / "ackfold"
PICTURE = PROJECT_DIR / "docs" / "operations" / "development.md"
BOTTOM = ("errors", "lazy", "progress", "version")
_NODE = re.compile(r'^\s+(\w+)(?:\["([^"]+)"\])?\s*$')


def layers() -> list[set[str]]:
    """The picture's subgraphs, top layer first, each the set of its packages."""
    text = PICTURE.read_text()
    mermaid = text[text.index("<!-- layers:") :].split("```mermaid", 1)[1].split("```", 1)[0]
    found: list[set[str]] = []
    inside = False
    for line in mermaid.splitlines():
        if line.strip().startswith("subgraph"):
            found.append(set())
            inside = True
        elif line.strip() == "end":
            inside = False
        elif inside and (node := _NODE.match(line)):
            found[-1].add(node.group(2) or node.group(1))
    return found


def _node(module: Path) -> str:
    return module.relative_to(PACKAGE).parts[0]


def imports() -> list[tuple[Path, str, str, list[str]]]:
    """(file, its node, the node it imports, the names) for each import of ackfold."""
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        if module.parent == PACKAGE:
            continue
        for statement in ast.walk(ast.parse(module.read_text())):
            if isinstance(statement, ast.ImportFrom) and statement.level == 0:
                targets = [(statement.module or "", [a.name for a in statement.names])]
            elif isinstance(statement, ast.Import):
                targets = [(a.name, []) for a in statement.names]
            else:
                continue
            for target, names in targets:
                parts = target.split(".")
                if parts[0] != "ackfold" or len(parts) < 2:
                    continue
                found.append((module, _node(module), parts[1], names))
    return found


def test_no_module_sits_outside_a_package() -> None:
    # The bottom layer, importing nothing of ackfold: `errors.py` holds the one error base
    # every package's errors derive from, `lazy.py` the packages' imports on first use,
    # `progress.py` the progress of long work, `version.py` the release.
    assert sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py") == [
        f"{name}.py" for name in BOTTOM
    ]


def test_the_bottom_layer_imports_nothing_of_ackfold() -> None:
    for name in BOTTOM:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        imported = [
            node.module or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0
        ] + [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
        assert not [m for m in imported if m.split(".")[0] == "ackfold"], name


def test_every_package_stands_in_exactly_one_layer_of_the_picture() -> None:
    drawn = [node for layer in layers() for node in layer]
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(drawn) == sorted({*packages, *BOTTOM})


def test_no_import_climbs_a_layer() -> None:
    level = {node: i for i, layer in enumerate(layers()) for node in layer}
    climbs = sorted(
        f"{module.relative_to(PACKAGE)}: {source} imports {target}"
        for module, source, target, _ in imports()
        if level[target] < level[source]
    )
    assert climbs == []


def test_no_private_name_is_imported_across_modules() -> None:
    private = sorted(
        f"{module.relative_to(PACKAGE)}: {name}"
        for module, _, _, names in imports()
        for name in names
        if name.startswith("_") and not name.startswith("__")
    )
    assert private == []


def module_imports() -> dict[str, set[str]]:
    """Each module of ackfold and the modules of ackfold it imports, at any depth of its
    code (`scripts/house.py` measures it, and draws the house from it)."""
    graph: dict[str, set[str]] = house_script().module_graph(PACKAGE.parent)
    return graph


def test_no_two_modules_import_each_other_in_a_circle() -> None:
    assert house_script().measure(PACKAGE.parent).circles == []


def house_script() -> ModuleType:
    """`scripts/house.py`, imported from its path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("house", PROJECT_DIR / "scripts" / "house.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_every_package_has_its_place_in_the_declared_order() -> None:
    house = house_script()
    assert sorted(house.ORDER) == sorted(house.measure(PACKAGE.parent).modules)


def test_at_most_two_arrows_climb_the_declared_order() -> None:
    # ACKFOLD_HOUSE_INCLUDE measures another tree's include/ (main's, say) with this order.
    house = house_script()
    include = Path(os.environ.get("ACKFOLD_HOUSE_INCLUDE", PACKAGE.parent))
    climbs = house.measure(include).climbs()
    shown = [f"{a} -> {b}: {', '.join(why)}" for (a, b), why in climbs.items()]
    assert len(climbs) <= house.MAX_CLIMBS, "\n".join(shown)


def test_the_house_page_is_what_its_script_writes() -> None:
    assert house_script().main(["--check"]) == 0, "run python scripts/house.py"


def ledger_rooms() -> list[str]:
    """The ledger's rooms as the picture's table lists them, top first."""
    text = PICTURE.read_text()
    table = text[text.index("<!-- ledger rooms -->") :].split("\n\n", 1)[0]
    return re.findall(r"^\| `(\w+)/` \|", table, flags=re.MULTILINE)


def test_the_ledger_rooms_are_the_subpackages_of_the_ledger() -> None:
    ledger = PACKAGE / "ledger"
    rooms = sorted(p.name for p in ledger.iterdir() if (p / "__init__.py").is_file())
    assert sorted(ledger_rooms()) == rooms
    # Only the face and the errors every room imports stand outside a room.
    assert sorted(p.name for p in ledger.glob("*.py")) == ["__init__.py", "errors.py"]


def test_no_ledger_room_imports_a_room_below_it_in_the_table() -> None:
    order = {room: i for i, room in enumerate(ledger_rooms())}

    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[:2] == ["ackfold", "ledger"] and len(parts) > 3 else None

    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in module_imports().items()
        if (source := room(module)) is not None
        for target in targets
        if (into := room(target)) is not None and order[into] > order[source]
    )
    assert wrong == []
