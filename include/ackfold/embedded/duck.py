"""A DuckDB connection for one job, bounded in memory, with the functions jobs share.

DuckDB runs in this process: `engine.memory_limit` caps what it holds, and beyond it
aggregations and joins spill to `<var_dir>/duckdb`. Nothing is installed or downloaded at
run time: the jobs read parquet and Arrow, which DuckDB's wheel carries.

`xxhash64` is Spark's `xxhash64` of one string column (seed 42, a signed bigint): the
hash by which `root_state` remembers the events an open root has folded, so that both
engines read and write the same `seen_event_hashes`. DuckDB's own `hash` is faster and
used within a run; `xxhash64` is computed only for what is kept.

Example:
    >>> from ackfold.config import load_settings
    >>> import tempfile
    >>> db = connect(load_settings(var_dir=tempfile.mkdtemp()))
    >>> db.execute("SELECT xxhash64('e1')").fetchall()[0][0] == event_hash("e1")
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold.ledger.ids import event_hash

if TYPE_CHECKING:
    import duckdb

    from ackfold.config import Settings


def connect(settings: Settings) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB bounded by `settings.engine`, spilling under `var_dir`."""
    import duckdb

    try:
        from duckdb.func import PythonUDFType
    except ImportError:  # duckdb before 1.4 keeps it in `duckdb.functional`
        from duckdb.functional import PythonUDFType  # type: ignore[no-redef]

    spill = settings.var_dir / "duckdb"
    spill.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "memory_limit": settings.engine.memory_limit,
        "temp_directory": str(spill),
        # No extension is ever fetched: a job needs none, and a worker may have no network.
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        # Rows come back in the order a query asks for, and only that: no need to keep the
        # insertion order of intermediate results, which costs memory on large inputs.
        "preserve_insertion_order": False,
    }
    if settings.engine.threads:
        config["threads"] = settings.engine.threads
    db = duckdb.connect(config=config)
    # Dates and naive timestamps (Spark's INT96) are UTC, as in Spark's session.
    db.execute("SET TimeZone = 'UTC'")
    db.create_function(
        "xxhash64", _xxhash64, ["varchar"], "bigint", type=PythonUDFType.ARROW, side_effects=False
    )
    return db


def _xxhash64(ids: Any) -> Any:
    # From a buffer of int64s: `pa.array` of a Python list would import pandas, a
    # second of a short command's start. Event ids are never null (contract v1).
    import array

    import pyarrow as pa

    hashes = array.array("q", (event_hash(i) for i in ids.to_pylist()))
    return pa.Array.from_buffers(pa.int64(), len(hashes), [None, pa.py_buffer(hashes)])
