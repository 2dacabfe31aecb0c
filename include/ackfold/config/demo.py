"""The demo's settings: its size and seeded faults (`demo:`), and the word-count app's
policy. No setting names the demo's app: the demo registers it where it runs, in its own
processes (`ackfold.demo.wordcount.with_demo_policy`) and in those `make run` starts
(their environment, `ackfold_dev.airflow_env.demo_app_env`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from pydantic import Field, field_validator

from ackfold.config.policy import AlertOverrides, AppDag, AppOverrides, QualityOverrides
from ackfold.config.values import Duration, Section


class FaultSettings(Section):
    """Seeded fault injection for the demo app (`ackfold.demo.faults`). Empty: none.

    `drop` and `fail` map a stage to the fraction of its input tuples it silently drops
    (no ack: the root times out) or explicitly fails. `poison` messages are malformed and
    fail on every attempt. `stuck` messages meet an outage: on every automatic attempt,
    the last stage counts the first half of their words and fails the rest; they are
    dead-lettered with those words left in the sink (`ackfold retract` takes them back),
    and go through when someone replays them by hand (from the UI or `ackfold replay`).
    `slow` makes a stage sleep once per micro-batch. `kill` names stages whose streaming
    query dies once, mid-batch (after its outputs, before its acks), and is restarted
    from its checkpoint.
    """

    seed: int = 0
    drop: dict[str, float] = Field(default_factory=dict)
    fail: dict[str, float] = Field(default_factory=dict)
    poison: int = Field(0, ge=0)
    stuck: int = Field(0, ge=0)
    slow: dict[str, Duration] = Field(default_factory=dict)
    kill: tuple[str, ...] = ()

    @field_validator("drop", "fail")
    @classmethod
    def _fractions(cls, value: dict[str, float]) -> dict[str, float]:
        for stage, fraction in value.items():
            if not 0 <= fraction < 1:
                raise ValueError(f"{stage}: a fraction must be at least 0 and below 1")
        return value

    def stages(self) -> set[str]:
        return {*self.drop, *self.fail, *self.slow, *self.kill}

    def describe(self) -> str:
        """One line for logs and reports, e.g. `seed 7: drop 5% at split, 3 poison`."""
        parts = [f"drop {f:.0%} at {s}" for s, f in self.drop.items() if f]
        parts += [f"fail {f:.0%} at {s}" for s, f in self.fail.items() if f]
        if self.poison:
            parts.append(f"{self.poison} poison")
        if self.stuck:
            parts.append(f"{self.stuck} stuck until replayed by hand")
        parts += [f"{s} slow by {d.total_seconds():g}s a batch" for s, d in self.slow.items()]
        parts += [f"{s} query killed once" for s in self.kill]
        return f"seed {self.seed}: " + (", ".join(parts) or "no faults")


class DemoSettings(Section):
    """`ackfold demo` (and `make run`): the word-count app on SQS, fed from a bundled text.

    The demo app's own policy (timeout, attempts, backoff) is `apps.wordcount`, with
    defaults suited to a demo where unset (`DEMO_APP_POLICY`).
    """

    messages: int = Field(2000, ge=1, le=1_000_000)
    faults: FaultSettings = FaultSettings(
        seed=1, drop={"split": 0.05}, fail={"split": 0.02}, poison=3, stuck=2, kill=("count",)
    )
    # Reconcile-and-replay cycles before the demo gives up waiting for every root to settle.
    max_cycles: int = Field(30, ge=1)


# The word-count demo app's policy (`ackfold.demo.wordcount`), in the settings of every
# process where the demo runs: short enough for the demo to settle in
# minutes, and five attempts so that a sentence the faults hit by chance is dead-lettered
# about once in half a million (0.07 ** 5), unlike a poison message.
DEMO_APP: Final = "wordcount"
DEMO_APP_POLICY: Final = AppOverrides(
    timeout=timedelta(seconds=10),
    max_attempts=5,
    replay_backoff=timedelta(milliseconds=200),
    replay_rate=1000.0,
    # The demo dead-letters its poison and stuck messages on purpose, and kills a query
    # mid-batch, which completes some replayed roots late; its first micro-batch takes in
    # every sentence at once, so the trees of that batch take tens of seconds.
    quality=QualityOverrides(
        max_duplicate_rate=0.05, max_dead_letter_rate=0.05, latency_p99=timedelta(minutes=2)
    ),
    # Stalled after a minute without a heartbeat (it beats every 20 s): a stopped driver
    # shows on its page, and raises the `stalled` alert, while a newcomer watches.
    alerts=AlertOverrides(max_heartbeat_age=timedelta(minutes=1)),
    source="sqs",
    source_queue="wordcount-sentences",
    stages=("split", "count"),
)

# What `make run` adds after the demo's report (`ackfold_dev.airflow_env.demo_app_env`): the
# word count as its own DAG, `ackfold_app_wordcount`, continuous: one long task that runs
# its queries on their triggers, its heartbeat on its page, restarted by Airflow when its
# driver dies; `ackfold_reconcile` keeps its own schedule (every 5 minutes), and the
# replay and quality checks follow it without a JVM. Its application is the packaged
# entry point of that name (`ackfold.jobs`).
DEMO_APP_DAG: Final = AppDag(application="wordcount_app.py", tags=("demo",), mode="continuous")


def with_app_defaults(
    apps: dict[str, AppOverrides], app: str = DEMO_APP, policy: AppOverrides = DEMO_APP_POLICY
) -> dict[str, AppOverrides]:
    """`apps` with `policy` filled in where `apps[app]` leaves a field unset."""
    mine = apps.get(app)
    merged = policy.model_dump(exclude_none=True)
    if mine is not None:
        own = mine.model_dump(exclude_none=True, exclude_defaults=True)
        quality = {**merged.get("quality", {}), **own.pop("quality", {})}
        merged.update(own, quality=quality or None)
    return {**apps, app: AppOverrides(**merged)}
