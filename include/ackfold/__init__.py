"""ackfold: Storm's guaranteed message processing for Spark streaming pipelines."""

__version__ = "0.1.0"
