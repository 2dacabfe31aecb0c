"""One configuration object for every ackfold entry point.

Settings come, highest priority first, from keyword arguments, environment variables
(`ACKFOLD_*`, nested with `__`: `ACKFOLD_SPARK__MASTER=spark://host:7077`), a YAML file
(`ACKFOLD_CONFIG`, or `ackfold.yaml` in the working directory), and the defaults below.

Example:
    >>> from ackfold.config import load_settings
    >>> settings = load_settings(spark={"master": "local[2]"})
    >>> settings.spark.master
    'local[2]'
"""

from ackfold.config.settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]
