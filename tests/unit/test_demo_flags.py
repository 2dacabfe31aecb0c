"""`ackfold demo`'s flags: faults from configuration, changed by flags; bad values refused
with the flag named, before any JVM starts."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from ackfold import spark as spark_module
from ackfold.cli import main as cli_module
from ackfold.config.demo import FaultSettings
from ackfold.demo import feed as feed_module
from ackfold.demo.feed import Feed, sentences, tokens
from ackfold.demo.run import faults_from_flags

BASE = FaultSettings(seed=1, drop={"split": 0.05}, poison=3, kill=("count",))


def test_flags_change_the_configured_faults() -> None:
    faults = faults_from_flags(BASE, seed="9", fail=["count=0.1"], slow=["split=2s"])
    assert faults.seed == 9
    assert faults.drop == {"split": 0.05}, "kept from the configuration"
    assert faults.fail == {"count": 0.1}
    assert faults.slow["split"].total_seconds() == 2
    assert faults.kill == ("count",)


def test_no_faults_starts_from_nothing() -> None:
    faults = faults_from_flags(BASE, no_faults=True, poison="1")
    assert faults == FaultSettings(poison=1)
    assert faults.describe() == "seed 0: 1 poison"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"drop": ["split"]}, "--drop takes STAGE=VALUE, got 'split'"),
        ({"drop": ["split=1.5"]}, "a fraction must be at least 0 and below 1"),
        ({"fail": ["count=lots"]}, "--fail.count"),
        ({"poison": "-1"}, "--poison"),
        ({"stuck": "some"}, "--stuck"),
        ({"seed": "x"}, "--seed"),
        ({"kill": ["sum"]}, "no stage named sum: the word count's stages are split, count"),
        ({"slow": ["merge=1s"]}, "no stage named merge"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        faults_from_flags(BASE, **flags)  # type: ignore[arg-type]
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--drop", "split=2"], "a fraction must be at least 0 and below 1"),
        (["--kill", "sum"], "no stage named sum"),
        (["--messages", "0"], "--messages must be at least 1"),
        (["--messages", "many"], "--messages must be a whole number"),
        (["--airflow"], "--airflow goes with --keep-running"),
    ],
)
def test_cli_refuses_bad_flags_with_exit_2_before_any_jvm(
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    def no_jvm(*args: object, **kwargs: object) -> None:
        raise AssertionError("a bad flag must be refused before Spark starts")

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    monkeypatch.setenv("ACKFOLD_VAR_DIR", str(tmp_path))
    assert cli_module.run(["demo", *args]) == 2
    assert message in capsys.readouterr().err


def test_docstring_examples_run() -> None:
    assert doctest.testmod(feed_module).failed == 0


def test_the_feed_is_reproducible_and_poison_is_excluded_from_the_true_counts() -> None:
    feed = Feed.build(100, FaultSettings(seed=4, poison=5))
    assert feed == Feed.build(100, FaultSettings(seed=4, poison=5))
    assert feed.poison != Feed.build(100, FaultSettings(seed=5, poison=5)).poison
    assert len(feed.poison) == 5
    lines = sentences()
    expected: dict[str, int] = {}
    for seq in range(100):
        if seq not in feed.poison:
            for word in tokens(lines[seq % len(lines)]):
                expected[word] = expected.get(word, 0) + 1
    assert dict(feed.true_counts()) == expected
    assert tokens("It is a truth, universally acknowledged!") == [
        "it", "is", "a", "truth", "universally", "acknowledged",
    ]  # fmt: skip


def test_stuck_messages_are_healthy_ones_and_left_out_of_the_counts_at_report_time() -> None:
    feed = Feed.build(100, FaultSettings(seed=4, poison=5, stuck=3))
    assert feed.poison == Feed.build(100, FaultSettings(seed=4, poison=5)).poison
    assert len(feed.stuck) == 3
    assert not feed.stuck & set(feed.poison)
    assert feed.dead_letters == sorted([*feed.poison, *feed.stuck])
    lines = sentences()
    stuck_words = sum(len(tokens(lines[seq % len(lines)])) for seq in feed.stuck)
    without = Feed.build(100, FaultSettings(seed=4, poison=5))
    assert sum(feed.true_counts().values()) == sum(without.true_counts().values()) - stuck_words
    assert "3 stuck until replayed by hand" in FaultSettings(stuck=3).describe()


def test_the_killer_kills_each_named_stage_once() -> None:
    from ackfold.demo.faults import InjectedKill, Killer

    killer = Killer(FaultSettings(kill=("split", "count")))
    killer.maybe_kill("other")
    for stage in ("split", "count"):
        with pytest.raises(InjectedKill, match=f"the {stage} query was killed mid-batch"):
            killer.maybe_kill(stage)
        killer.maybe_kill(stage)  # once only: the restarted query runs through
    assert killer.killed == ["split", "count"]
