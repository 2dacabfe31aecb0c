"""One configuration object for every ackfold entry point.

Settings come, highest priority first, from keyword arguments, environment variables
(`ACKFOLD_*`, nested with `__`: `ACKFOLD_SPARK__MASTER=spark://host:7077`), a YAML file
(`ACKFOLD_CONFIG`, or `ackfold.yaml` in the working directory), and the defaults below.

- `settings`: `Settings` and `load_settings` (re-exported here), `ConfigError`;
- `sections`: the settings of each part (Spark, SQS, Kafka, Airflow, reconcile, ...);
- `policy`: per-app policies (`AppPolicy`, `AppOverrides`) and quality thresholds;
- `demo`: the demo's faults and size, and the word-count app's policy;
- `values`: durations, schedules, and `Section`, the base of every section.

Example:
    >>> from ackfold.config import load_settings
    >>> settings = load_settings(spark={"master": "local[2]"})
    >>> settings.spark.master
    'local[2]'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ackfold.config.settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]


def __getattr__(name: str) -> Any:
    # On first use (PEP 562): a module that needs only `values` (a parser of the CLI,
    # say) does not pay for building every settings model, a fifth of a second.
    if name not in __all__:
        raise AttributeError(f"module 'ackfold.config' has no attribute {name!r}")
    from ackfold.config import settings

    value = getattr(settings, name)
    globals()[name] = value
    return value
