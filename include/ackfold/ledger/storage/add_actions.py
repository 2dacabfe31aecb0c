"""A Delta table's add actions (its data files, with their partition values and
statistics) as a `pyarrow.Table`, whatever deltalake returns them as.

Example:
    >>> add_actions(DeltaTable("/srv/warehouse/root_state")).column_names[:2]  # doctest: +SKIP
    ['path', 'size_bytes']
"""

from __future__ import annotations

from typing import Any


def add_actions(table: Any) -> Any:
    """The add actions of `table` (a delta-rs `DeltaTable`) at its version, flattened
    (`path`, `size_bytes`, `partition.<column>`, `min.<column>`, `max.<column>`, ...), as a
    `pyarrow.Table`: deltalake before 1.1 returns a record batch, later ones an Arrow
    stream. Not `pyarrow.table(...)`, which imports pandas first, a second of a short
    command's start."""
    import pyarrow as pa

    data = table.get_add_actions(flatten=True)
    if not hasattr(data, "__arrow_c_stream__") and hasattr(data, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(data)])
    return pa.RecordBatchReader.from_stream(data).read_all()
