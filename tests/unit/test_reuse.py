"""`ackfold.track.reuse.reused`: a builder's result kept per arguments, built again for
others, and the table bounded (plain Python: no JVM, so the Connect-or-none key)."""

from __future__ import annotations

from ackfold.track import reuse
from ackfold.track.reuse import reused

built: list[tuple[str, tuple[str, ...] | None]] = []


@reused
def build(stage: str, to: tuple[str, ...] | None) -> object:
    built.append((stage, to))
    return object()


def test_the_same_arguments_get_the_same_result_built_once() -> None:
    built.clear()
    first = build("split", ("count",))
    assert build("split", ("count",)) is first
    assert build("split", ["count"]) is first, "a list names the same stages as a tuple"
    assert build("split", None) is not first
    assert build(stage="split", to=("count",)) is not first, "keywords are their own key"
    assert built == [("split", ("count",)), ("split", None), ("split", ("count",))]


def test_the_table_starts_over_when_full(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(reuse, "_MOST", 3)
    monkeypatch.setattr(reuse, "_BUILT", {})
    kept = build("a", None)
    for stage in ("b", "c", "d"):
        build(stage, None)
    assert len(reuse._BUILT) <= 3
    assert build("a", None) is not kept, "built again after the table started over"
