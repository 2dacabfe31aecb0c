"""The reconcile benchmark's figure: throughput against ledger size, and the incremental
cost against history, drawn from `bench/reconcile.py`'s results into one PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ENGINES = {  # results key -> legend, in the order drawn
    "duckdb": "DuckDB's bare fold (same files), whole command",
    "ackfold": "ackfold reconcile, embedded engine, whole command",
    "spark": "ackfold reconcile, Spark engine, whole command",
}


def plot_reconcile(results: dict[str, Any], path: Path) -> None:
    """Draw throughput per engine (left) and the incremental reconcile time (right)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    sizes = sorted(results["sizes"].values(), key=lambda row: row["events"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    for key, label in ENGINES.items():
        points = [(row["events"], row[key]["events_per_s"]) for row in sizes if key in row]
        if points:
            xs, ys = zip(*points, strict=True)
            left.plot(xs, ys, marker="o", label=label)
    left.set(xscale="log", yscale="log", xlabel="events in the ledger",
             ylabel="events folded per second", title="Fold throughput, 2 cores")  # fmt: skip
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)

    increments = sorted((int(over), row) for over, row in results["increment"].items())
    right.bar([f"{over / 1e6:g}M" for over, _ in increments],
              [row["seconds"] for _, row in increments], color="tab:green")  # fmt: skip
    right.set(xlabel="events already reconciled", ylabel="seconds",
              title=f"Reconciling {results['increment_events']:,} new events")  # fmt: skip
    right.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
