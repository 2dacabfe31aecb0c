"""The one place that knows which engines exist and which one a run gets.

- `register(name, factory)`: an engine is known by its name (`engine.kind`). The two of
  ackfold are registered here, by the dotted path of their class, so choosing one imports
  only it; a third is one new module plus one `register` call.
- `engine_for(settings)`: the name `settings` choose (`engine.kind`, `auto` resolved by
  the warehouse).
- `choose(settings, spark=...)`: that engine, made for one run.
- `resolve(engine, settings, spark=...)`: what a run function does with its `engine`
  argument: an engine as given, a registered name, or (None) the settings' choice;
  `for_run` holds it for the run, and closes what it made.

Example:
    >>> from ackfold.config import load_settings
    >>> engine = choose(load_settings(warehouse="/srv/warehouse"))
    >>> engine.name, engine.runs_in_task
    ('embedded', True)
    >>> sorted(registered())
    ['embedded', 'spark']
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from ackfold.engines.base import Engine, EngineFactory, SparkSource

if TYPE_CHECKING:
    from ackfold.config import Settings
    from ackfold.ledger.storage.run_store import Store

EMBEDDED: Final = "embedded"
SPARK: Final = "spark"
AUTO: Final = "auto"

# name -> the factory, or "module:attribute" where it is (imported when first chosen).
_REGISTRY: dict[str, EngineFactory | str] = {
    EMBEDDED: "ackfold.engines.embedded:EmbeddedEngine",
    SPARK: "ackfold.engines.spark:SparkEngine",
}


def register(name: str, factory: EngineFactory | str) -> None:
    """Make the engine `name` choosable (`engine.kind: name`, or `engine=name` of a run
    function). `factory(settings, spark)` makes the engine of one run; a string
    `"module:attribute"` names it without importing it yet. Registering a name again
    replaces it."""
    if not name or name == AUTO:
        raise ValueError(f"engine name {name!r}: use a name other than '' and 'auto'")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget the engine `name` (a test's engine); ackfold's own two stay."""
    if name in (EMBEDDED, SPARK):
        raise ValueError(f"engine {name!r} is ackfold's own: it cannot be unregistered")
    _REGISTRY.pop(name, None)


def registered() -> tuple[str, ...]:
    """The names of the registered engines."""
    return tuple(_REGISTRY)


def build(
    name: str, settings: Settings, *, spark: SparkSource = None, store: Store | None = None
) -> Engine:
    """The engine registered as `name`, made for one run; `spark` is the session (or what
    starts it) for an engine that runs on Spark, `store` the run's store (given to a
    factory that takes `store`). Raises `ConfigError` for an unknown name."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        from ackfold.config.settings import ConfigError

        raise ConfigError(
            f"engine {name!r} is not registered (engine.kind): use one of "
            f"{', '.join([AUTO, *_REGISTRY])}, or register it (`ackfold.engines.register`)"
        ) from None
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = getattr(importlib.import_module(module), attribute)
        _REGISTRY[name] = factory
    if store is not None and _takes_store(factory):
        with_store: Any = factory  # EngineFactory's type names the two positional arguments
        made: Engine = with_store(settings, spark, store=store)
        return made
    return factory(settings, spark)


def _takes_store(factory: EngineFactory) -> bool:
    import inspect

    try:
        return "store" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin, or no signature: called without it
        return False


def engine_for(settings: Settings, *, refuse: bool = True) -> str:
    """The name of the engine `settings` choose: `engine.kind`, with `auto` resolved by the
    warehouse. An engine whose commits to the derived tables could be lost on the store
    (Spark on S3 without Delta's DynamoDB log store, or on a shared file system) is refused
    with its error (`UnsafeSparkCommits`), unless `refuse` is False: a DAG built on a host
    that is not the worker's says which task to make, and the task's run refuses.

    Example:
        >>> from ackfold.config import load_settings
        >>> engine_for(load_settings(warehouse="/srv/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="hdfs://nn/warehouse"))
        'spark'
        >>> engine_for(load_settings(warehouse="s3a://lake/warehouse"))
        'embedded'
        >>> engine_for(load_settings(warehouse="s3a://lake/warehouse", spark={"remote": "sc://h"}))
        'embedded'
        >>> engine_for(load_settings(warehouse="/srv/warehouse", engine={"kind": "spark"}))
        'spark'
    """
    kind = settings.engine.kind
    name = _auto(settings) if kind == AUTO else kind
    if refuse:
        build(name, settings).check_commits()
    return name


def _auto(settings: Settings) -> str:
    from ackfold.ledger.storage.protocol import unsafe_spark_commits
    from ackfold.ledger.storage.store import store_kind

    # delta-rs commits to a local disk and every object store: all but `other` (HDFS, ...).
    if store_kind(settings.table_root) == "other":
        return SPARK
    # A team that runs its jobs on a Spark Connect server keeps them there, where Spark
    # may commit the derived tables; elsewhere (S3, a shared file system) the embedded.
    if (
        settings.spark.remote
        and unsafe_spark_commits(settings.table_root, settings.spark.conf) is None
    ):
        return SPARK
    return EMBEDDED


def choose(
    settings: Settings,
    *,
    spark: SparkSource = None,
    refuse: bool = True,
    store: Store | None = None,
) -> Engine:
    """The engine `settings` choose (`engine_for`), made for one run (on `store`)."""
    return build(engine_for(settings, refuse=refuse), settings, spark=spark, store=store)


def resolve(
    engine: Engine | str | None,
    settings: Settings,
    *,
    spark: SparkSource = None,
    refuse: bool = True,
    store: Store | None = None,
) -> Engine:
    """A run function's engine: `engine` itself, the engine registered under that name,
    or (None) the one `settings` choose (`choose`, refused as `refuse` says); one made
    here is made on the run's `store`."""
    if engine is None:
        return choose(settings, spark=spark, refuse=refuse, store=store)
    if isinstance(engine, str):
        return build(engine, settings, spark=spark, store=store)
    return engine


@contextmanager
def for_run(
    engine: Engine | str | None,
    settings: Settings,
    *,
    spark: SparkSource = None,
    refuse: bool = True,
    store: Store | None = None,
) -> Iterator[Engine]:
    """`resolve`, as a run function holds its engine: one it made (from a name, or from the
    settings) is closed when the run ends; one it was given is left to the giver."""
    chosen = resolve(engine, settings, spark=spark, refuse=refuse, store=store)
    try:
        yield chosen
    finally:
        if chosen is not engine:
            chosen.close()


def by_session(spark: SparkSource) -> str:
    """The engine a caller means that hands over a Spark session (or what starts one) and
    no engine: Spark; none, the embedded one (`ackfold.runs.replayer.Replayer`)."""
    return EMBEDDED if spark is None else SPARK
