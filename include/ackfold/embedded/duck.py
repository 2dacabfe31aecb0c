"""A DuckDB connection for one job, bounded in memory, with the functions jobs share.

DuckDB runs in this process, and `engine.memory_limit` is the job's budget: DuckDB gets
what the process does not hold already when it connects, less what the job says it needs
beside DuckDB (`reserve`: Great Expectations, for the quality checks), and beyond that its
aggregations and joins spill to `<var_dir>/duckdb`. (Given the whole budget, a quality run
over 10M events peaked at 2.4 GB with a limit of 2 GB: DuckDB's full 2 GB, plus the
interpreter, Arrow and GX.) Nothing is installed or downloaded at
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

import re
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.schema.ids import event_hash

if TYPE_CHECKING:
    import duckdb

    from ackfold.config import Settings


def connect(settings: Settings, *, reserve: int = 0) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB bounded by `settings.engine`, spilling under `var_dir`: it may
    hold `engine.memory_limit` less this process's memory now, less `reserve` bytes that
    the job needs beside it (`duckdb_limit`)."""
    import duckdb

    try:
        from duckdb.func import PythonUDFType
    except ImportError:  # duckdb before 1.4 keeps it in `duckdb.functional`
        from duckdb.functional import PythonUDFType  # type: ignore[no-redef]

    spill = settings.var_dir / "duckdb"
    spill.mkdir(parents=True, exist_ok=True)
    limit = duckdb_limit(byte_count(settings.engine.memory_limit), resident_bytes(), reserve)
    config: dict[str, Any] = {
        "memory_limit": f"{limit // 2**20}MiB",
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


# What DuckDB gets at least, whatever the process holds: a job must be able to run.
MIN_DUCKDB_BYTES: Final = 256 * 2**20
_UNITS: Final = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                 "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def byte_count(text: str) -> int:
    """`engine.memory_limit` (`2GB`, `512MiB`: DuckDB's units) in bytes.

    Example:
        >>> byte_count("2GB"), byte_count("1.5 GiB")
        (2000000000, 1610612736)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)\s*", text, re.IGNORECASE)
    if match is None:
        raise ValueError(f"engine.memory_limit: {text!r} is not a size such as 2GB or 512MiB")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def duckdb_limit(budget: int, held: int, reserve: int) -> int:
    """DuckDB's share of a job's `budget` of bytes: what this process does not `held`
    already, less the `reserve` the job needs beside DuckDB; `MIN_DUCKDB_BYTES` at least.

    Example:
        >>> duckdb_limit(2 * 2**30, 300 * 2**20, 512 * 2**20) // 2**20
        1236
        >>> duckdb_limit(2**30, 900 * 2**20, 512 * 2**20) // 2**20
        256
    """
    return max(MIN_DUCKDB_BYTES, budget - held - reserve)


def resident_bytes() -> int:
    """This process's resident memory now (Linux's `/proc/self/statm`; 0 elsewhere)."""
    import os
    from pathlib import Path

    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _xxhash64(ids: Any) -> Any:
    # From a buffer of int64s: `pa.array` of a Python list would import pandas, a
    # second of a short command's start. Event ids are never null (contract v1).
    import array

    import pyarrow as pa

    hashes = array.array("q", (event_hash(i) for i in ids.to_pylist()))
    return pa.Array.from_buffers(pa.int64(), len(hashes), [None, pa.py_buffer(hashes)])
