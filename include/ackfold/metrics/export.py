"""Where metrics go: an OTLP exporter from `metrics.*` and the standard
`OTEL_EXPORTER_OTLP_*` variables, and a meter that pushes once, when the run ends.

Every reconcile, replay and maintenance run is a short process (a spark-submit, an Airflow
task): each one opens a meter, records, and pushes everything at exit
(`PeriodicExportingMetricReader` with no period: no thread, one `force_flush`). Counters
are cumulative from the run's start (OTLP's default and what Prometheus takes): sum them
over runs with `increase()`.

Metrics never fail a run: an unreachable collector is one warning in the log.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ackfold.config import ConfigError, Settings

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

log = logging.getLogger("ackfold.metrics")

HTTP: Final = "http/protobuf"
GRPC: Final = "grpc"
METRICS_PATH: Final = "/v1/metrics"
_ENDPOINT_VARS: Final = ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_VARS: Final = ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


@dataclass(frozen=True)
class Target:
    """Where the metrics go: `protocol`, and `endpoint` (None: the exporter reads the
    `OTEL_EXPORTER_OTLP_*` variables itself); `described` is for the log."""

    protocol: str
    endpoint: str | None
    described: str


def target(settings: Settings) -> Target | None:
    """The OTLP target the settings and the environment name, or None: metrics are off.

    Example:
        >>> from ackfold.config import load_settings
        >>> where = target(load_settings(metrics={"endpoint": "http://collector:4318"}))
        >>> where.protocol, where.endpoint
        ('http/protobuf', 'http://collector:4318/v1/metrics')
    """
    metrics = settings.metrics
    if not metrics.enabled:
        return None
    named = [os.environ[name].strip() for name in _PROTOCOL_VARS if os.environ.get(name)]
    protocol: str = metrics.protocol or (named[0] if named else HTTP)
    if protocol not in (HTTP, GRPC):
        source = "metrics.protocol" if metrics.protocol else " or ".join(_PROTOCOL_VARS)
        raise ConfigError(f"{source} is {protocol!r}: ackfold exports OTLP as {HTTP} or {GRPC}")
    if metrics.endpoint:
        base = metrics.endpoint.rstrip("/")
        url = base + METRICS_PATH if protocol == HTTP else base
        return Target(protocol, url, "metrics.endpoint")
    given = [name for name in _ENDPOINT_VARS if os.environ.get(name)]
    if not given:
        return None
    return Target(protocol, None, given[0])


def _exporter(where: Target) -> Any:
    if where.protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(endpoint=where.endpoint)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpExporter,
    )

    return HttpExporter(endpoint=where.endpoint)


@contextmanager
def meter(settings: Settings, *, run: str) -> Iterator[Meter | None]:
    """A meter whose measurements are pushed, once, when the block ends; None when metrics
    are off. `run` (`reconcile`, `replay`, ...) becomes the `ackfold.run` resource
    attribute."""
    try:
        where = target(settings)
    except ConfigError as exc:
        log.warning("metrics off: %s", exc)
        where = None
    if where is None:
        yield None
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, str] = {"ackfold.run": run}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = settings.metrics.service_name
    reader = PeriodicExportingMetricReader(_exporter(where), export_interval_millis=math.inf)
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create(attributes))
    try:
        yield provider.get_meter("ackfold")
    finally:
        try:
            provider.force_flush()  # the one push (without a period, shutdown sends nothing)
            provider.shutdown()
        except Exception as exc:  # a collector down must not fail the run
            log.warning("metrics not exported to %s: %s", where.described, exc)
        else:
            log.info("metrics exported (%s, %s)", where.protocol, where.described)
