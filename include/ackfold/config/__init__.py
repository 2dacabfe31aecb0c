"""One configuration object for every ackfold entry point.

Settings come, highest priority first, from keyword arguments, environment variables
(`ACKFOLD_*`, nested with `__`: `ACKFOLD_SPARK__MASTER=spark://host:7077`), a YAML file
(`ACKFOLD_CONFIG`, or `ackfold.yaml` in the working directory), and the defaults below.

- `settings`: `Settings` and `load_settings` (re-exported here), `ConfigError`;
- `connections`: what ackfold connects to (Spark, SQS, Kafka, Airflow);
- `sections`: how each part runs (reconcile, engine, replay, UI, quality, maintenance, ...);
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

from ackfold import lazy

if TYPE_CHECKING:
    from ackfold.config.settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]


# On first use: a module that needs only `values` (a parser of the CLI, say) does not
# pay for building every settings model, a fifth of a second.
_LAZY = dict.fromkeys(__all__, "ackfold.config.settings")


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, name)
