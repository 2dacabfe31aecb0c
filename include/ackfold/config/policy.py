"""Per-app reliability policy: how long a root may take, how often it is retried, and
what the quality checks allow (`defaults:`, and each app's overrides under `apps:`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field

from ackfold.config.values import Duration, Rate, Section


class QualityThresholds(Section):
    """What the delivery-guarantee checks (`ackfold quality`) allow one app.

    - `grace`: how long after its timeout a root may still be unsettled (a reconcile and
      a replay have to run, with backoff) before it counts as lost.
    - `max_duplicate_rate`: the most messages, as a fraction, processed more than once
      (a root `completed_late` after its replay was sent).
    - `max_dead_letter_rate`: the most messages, as a fraction, that end dead-lettered.
    - `latency_p99`: the SLA of the complete latency (first to last event of a completed
      root), 99th percentile; unset, the app's `timeout`.
    """

    grace: Duration = timedelta(minutes=15)
    max_duplicate_rate: float = Field(0.01, ge=0, le=1)
    max_dead_letter_rate: float = Field(0.01, ge=0, le=1)
    latency_p99: Duration | None = None


class QualityOverrides(Section):
    """An app's `quality:` entry: any field left out falls back to `defaults.quality`."""

    grace: Duration | None = None
    max_duplicate_rate: float | None = Field(None, ge=0, le=1)
    max_dead_letter_rate: float | None = Field(None, ge=0, le=1)
    latency_p99: Duration | None = None


class AppPolicy(Section):
    """Per-app reliability policy: how long a root may take, and how often it is retried."""

    timeout: Duration = timedelta(minutes=5)
    idle_timeout: Duration | None = None
    max_attempts: int = Field(3, ge=1, le=100)
    # Attempt k+1 is sent no sooner than replay_backoff * 2**(k-1) after attempt k failed.
    replay_backoff: Duration = timedelta(seconds=30)
    # Messages per second an automatic replay sends back to the app's source queue
    # (the range of `ackfold replay --rate` and the manual replay's `rate`).
    replay_rate: Rate = 50.0
    quality: QualityThresholds = QualityThresholds()


class AppOverrides(Section):
    """An app's entry under `apps:`: any field left out falls back to `defaults:`."""

    timeout: Duration | None = None
    idle_timeout: Duration | None = None
    max_attempts: int | None = Field(None, ge=1, le=100)
    replay_backoff: Duration | None = None
    replay_rate: Rate | None = None
    source: Literal["sqs", "kafka"] | None = None
    source_queue: str | None = None
    # Where dead letters go; by default the queue's RedrivePolicy target, else <queue>-dlq.
    dead_letter_queue: str | None = None
    # Kafka: the topic replays go to, which the app reads besides source_queue; unset,
    # replays go back to source_queue.
    retry_queue: str | None = None
    stages: tuple[str, ...] = ()
    quality: QualityOverrides | None = None
