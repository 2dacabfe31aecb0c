"""ackfold: Storm's guaranteed message processing for Spark streaming pipelines.

The public API, importable from here:

- `Tracker`, with `Tuple` and `TrackingError`: Storm's OutputCollector in plain Python,
  writing ledger rows (no Spark needed);
- `StageTracker`: the same verbs over DataFrames, for Structured Streaming apps;
- `LedgerWriter`: creates the ledger and appends a `Tracker`'s rows, without a JVM;
- `Reconciler`: one reconcile run, the XOR fold of the new events into `root_state`;
- `Replayer` and `ReplayRequest`: plan, then execute, one replay run;
- `Settings`, `load_settings` and `ConfigError`: every setting, loaded and checked;
- `AckfoldError`: the base of every error ackfold raises on purpose (`ackfold.errors`).

The one-call entry points, which also take the ledger lock, are
`ackfold.runs.run_reconcile(settings)` and `ackfold.runs.run_replay(settings, request)`
(`ackfold.runs` holds every verb's run: each chooses its engine).

`import ackfold` stays light: it imports the plain `Tracker` only, and every other name
on first use, so the CLI's read paths and the UI run without Spark (and a tracked app
pays for pyspark only where it uses `StageTracker`).

The packages follow a message: `sources` (where it comes from) -> `track` (an app
registers, anchors, acks) -> `ledger` (the Delta tables) -> `reconcile` (the fold) ->
`replay` (back to its source) -> `quality` (the guarantees, checked). `ui` and `cli` read
the ledger; `config` and `demo` serve them all. (The servers on a development machine
are not here: they are a checkout's development wing, `dev/`.)

Example:
    >>> from ackfold import Tracker
    >>> tracker = Tracker("wordcount")
    >>> sentence = tracker.spout("msg-1")
    >>> tracker.ack(sentence, stage="split")
    >>> [event["kind"] for event in tracker.drain()]
    ['init', 'ack']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold import lazy
from ackfold.errors import AckfoldError
from ackfold.track.tracker import Tracker, TrackingError
from ackfold.track.tuples import Tuple
from ackfold.version import __version__

if TYPE_CHECKING:
    from ackfold.config import ConfigError, Settings, load_settings
    from ackfold.ledger.commits.writer import LedgerWriter
    from ackfold.reconcile.reconciler import Reconciler
    from ackfold.replay.request import ReplayRequest
    from ackfold.runs.replayer import Replayer
    from ackfold.track.stage import StageTracker

__all__ = [
    "AckfoldError",
    "ConfigError",
    "LedgerWriter",
    "Reconciler",
    "ReplayRequest",
    "Replayer",
    "Settings",
    "StageTracker",
    "Tracker",
    "TrackingError",
    "Tuple",
    "__version__",
    "load_settings",
]

# The names imported on first use (PEP 562), and the module that defines each.
_LAZY = {
    "StageTracker": "ackfold.track.stage",
    "LedgerWriter": "ackfold.ledger.commits.writer",
    "Reconciler": "ackfold.reconcile.reconciler",
    "Replayer": "ackfold.runs.replayer",
    "ReplayRequest": "ackfold.replay.request",
    "Settings": "ackfold.config",
    "load_settings": "ackfold.config",
    "ConfigError": "ackfold.config",
}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
