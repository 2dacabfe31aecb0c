"""Shared fixtures and the run's plumbing (`tests/suite.py`). Tests in tests/<tier>/ get
that tier's marker; the tiers that need a JVM also get an xdist group (`GROUPS`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ackfold.config import Settings, load_settings
from tests import spark_cds, suite
from tests.cpu_census import CpuCensus
from tests.spark_sessions import SparkSessions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROJECT_DIR = Path(__file__).resolve().parents[1]
JARS_DIR = PROJECT_DIR / "var" / "jars"
TIERS = (
    "spark", "airflow", "sqs", "kafka", "e2e", "browser", "cluster", "connect", "pythons",
    "bench", "docs", "conformance", "s3", "stores", "install",
)  # fmt: skip
# The xdist group of each tier that starts servers or a JVM: a group runs on one worker, in
# order, and shares that worker's Spark session. Tests on the `make run` stack form the group
# "stack", whatever their tier. The fast tiers (unit, ui, deploy) are spread over the workers
# a module at a time, so that a module's fixtures are built once. A worker's Spark session
# serves every group it runs (`spark_sessions`): the spark tier, the kafka tier and the
# Spark engine's half of the conformance tier are three groups, not one. As one they were
# 36 of the run's 36.5 minutes on one worker (shared machine, 4 workers on 2 cores), the
# longest group: whatever the CPU saved elsewhere, the run could not end before it.
GROUPS = {
    "spark": "spark",
    "kafka": "kafka",
    "sqs": "sqs",
    "e2e": "e2e",
    "airflow": "airflow",
    "cluster": "cluster",
    "connect": "connect",
    "docs": "docs",
    "s3": "s3",
    "stores": "stores",
    "install": "install",
}
# Tiers whose tests share no worker state: each runs its work in processes of its own
# (a bench script, pytest on another Python) and attaches to the run's shared servers
# (`suite.shared_server`). Each test is a group of its own, so that the two workers share
# them out: as one group each tier was one worker's 10 to 15 minutes, the end of the run.
SPREAD = ("bench", "pythons")
# The install tier's dependency ends build ackfold in the checkout (its build/): one after
# the other, but beside the wheel's tests, which build in a copy of the checkout.
DEPENDENCY_ENDS = "tests/install/test_dependency_ends.py"
STACK_GROUP = "stack"
CONFORMANCE_ON_SPARK = "conformance-spark"
# Every Spark driver the tests start runs on tiny data, 2 cores for the whole run.
# - C1 alone and the serial GC halve a short-lived driver's CPU time. A JVM that serves a
#   worker's whole group (`long_lived_jvm`: the shared session, the Connect server) keeps
#   C2: the spark and kafka tiers, alone, spent 14:14 CPU-minutes with it against 16:10
#   without. A session of a few tests does not: the pythons tier's took 64 s with C1
#   alone, 149 s with C2.
# - A code cache of 1 GB: the default 240 MB filled up in a session that ran a few
#   reconciles, and the JVM then stopped compiling ("CodeCache is full").
# - Spark's interpreted expressions instead of generated code: on a few rows, compiling
#   Java for every query is most of the work (a reconcile on a fresh ledger: 7.5 s, 5 s
#   without). Spark keeps both paths equivalent and tests each; the bench tier runs its
#   scripts with Spark's default, code generation, so that path is run here too.
SHORT_LIVED = "-XX:TieredStopAtLevel=1"
SPARK_TEST_JVM = f"{SHORT_LIVED} -XX:+UseSerialGC -XX:ReservedCodeCacheSize=1g"
SPARK_INTERPRETED = (
    "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
)


@contextmanager
def long_lived_jvm() -> Iterator[None]:
    """In an xdist worker, whose JVMs serve its whole group of tests, the JVMs started
    inside keep Spark's default tiered compilation (C1, then C2), unless the user set
    SPARK_SUBMIT_OPTS. A run without workers (one module, the pythons tier's) is short."""
    default = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "PYTEST_XDIST_WORKER" not in os.environ or not default.startswith(SPARK_TEST_JVM):
        yield
        return
    os.environ["SPARK_SUBMIT_OPTS"] = default.replace(f"{SHORT_LIVED} ", "", 1)
    try:
        yield
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = default


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    # The controller marks the run before its workers start: they, and every process they
    # start, inherit the marker and the run's directory.
    if _is_controller(config) and suite.RUN_MARKER not in os.environ:
        os.environ[suite.RUN_MARKER] = uuid.uuid4().hex
        os.environ[suite.RUN_DIR] = tempfile.mkdtemp(prefix="ackfold-test-run-")
    # The repository's own state (the jar cache of `make setup`, ...) is its var/, as for
    # `make test`, which exports it: a test that sets none gets the checkout's.
    os.environ.setdefault("ACKFOLD_VAR_DIR", str(PROJECT_DIR / "var"))
    # Every Spark driver the tests start, in-process or by spark-submit (Airflow's too):
    # Spark's launcher reads SPARK_SUBMIT_OPTS, and its `spark.*` properties are Spark
    # settings. A user's value wins.
    if "SPARK_SUBMIT_OPTS" not in os.environ:  # the controller's, before its workers start
        archive = _class_archive(config)
        os.environ["SPARK_SUBMIT_OPTS"] = f"{SPARK_TEST_JVM} {SPARK_INTERPRETED} {archive}".strip()
    # Only a run of the whole suite (no paths given: pytest's `testpaths`) keeps its record
    # as the last run's; a run of a few files keeps its own beside it.
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    record = "last-test-run.json" if whole else "last-partial-test-run.json"
    config.pluginmanager.register(
        TierTimes(census=_is_controller(config), record=record), "ackfold-tier-times"
    )


FAST_TIERS = ("unit", "ui", "deploy")


def _class_archive(config: pytest.Config) -> str:
    """The JVM options that map the Spark class-data archive of this var dir
    (`tests.spark_cds`), made first if the run may start Spark (a run of the fast tiers
    alone starts none, and makes none)."""
    if not _may_start_spark(config.args):
        return ""
    archive = spark_cds.archive_path(Path(os.environ["ACKFOLD_VAR_DIR"]))
    if archive is not None and not archive.is_file():
        started = time.monotonic()
        made = spark_cds.make_archive(archive, JARS_DIR, SPARK_TEST_JVM)
        said = f"made in {time.monotonic() - started:.0f} s" if made else "not made"
        print(f"Spark's class-data archive {archive}: {said}", file=sys.stderr)
    return spark_cds.jvm_options(archive)


def _may_start_spark(args: list[str]) -> bool:
    """Whether a run of `args` (paths or node ids; none: the test paths) reaches beyond
    the fast tiers."""
    tests = PROJECT_DIR / "tests"
    for arg in args or [str(tests)]:
        path = Path(arg.split("::", 1)[0]).resolve()
        if not path.is_relative_to(tests) or path == tests:
            return True
        if path.relative_to(tests).parts[0] not in FAST_TIERS:
            return True
    return False


def _tier(item: pytest.Item) -> str:
    return Path(str(item.fspath)).relative_to(PROJECT_DIR / "tests").parts[0]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        on_stack = "stack" in getattr(item, "fixturenames", ())
        if tier == "conformance" and _engine(item) == "spark":
            item.add_marker(pytest.mark.spark)
        group = group_of(tier, item.nodeid, on_stack=on_stack, engine=_engine(item))
        item.add_marker(pytest.mark.xdist_group(group))
    # The tests on the shared `make run` stack run one after the other, the one that
    # Ctrl-C's it last.
    on_stack = [item for item in items if "stack" in getattr(item, "fixturenames", ())]
    if on_stack:
        first = items.index(on_stack[0])
        on_stack.sort(key=lambda item: item.get_closest_marker("stops_stack") is not None)
        rest = [item for item in items if item not in on_stack]
        items[:] = rest[:first] + on_stack + rest[first:]
    # xdist hands the groups out in the order of the items (addopts: --no-loadscope-reorder):
    # - the stores tier first: its Spark module needs a JVM with the stores' connectors
    #   (`SparkSessions` stops a worker's shared JVM for it, and starts that anew after it):
    #   first, it takes a worker before any shared session started, one JVM start less;
    # - then the pythons tier, long tests that wait on nothing (the fast tier, and a Spark
    #   session, in runs of their own on 3.13), so that they do not end the run alone on
    #   one core;
    # - then the other groups, the largest first, as xdist would.
    sizes = Counter(_group(item) for item in items)
    first = {"stores": 0, "pythons": 1}
    items.sort(key=lambda item: (first.get(_tier(item), 2), -sizes[_group(item)], _group(item)))


def group_of(tier: str, nodeid: str, *, on_stack: bool = False, engine: str | None = None) -> str:
    """The xdist group of the test `nodeid` of `tier`: its tier's (`GROUPS`), its own
    (`SPREAD`), or its module's (the fast tiers)."""
    if tier == "conformance" and engine == "spark":
        return CONFORMANCE_ON_SPARK  # the Spark engine's runs of the conformance tests
    if on_stack:
        return STACK_GROUP
    if tier in SPREAD:
        # No brackets in a group: xdist appends `@group` to the test's id, read after its
        # parameters' `]` (`grouped`).
        name = nodeid.split("::", 1)[-1].replace("[", "(").replace("]", ")")
        return f"{tier}:{name}"
    if nodeid.startswith(DEPENDENCY_ENDS):
        return "install-ends"
    return GROUPS.get(tier, nodeid.split("::")[0])


def _group(item: pytest.Item) -> str:
    return item.get_closest_marker("xdist_group").args[0]


def _engine(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("engine") if callspec is not None else None


def grouped(nodeid: str) -> bool:
    """Whether xdist gave the test `nodeid` its group: `...[params]@group`."""
    return "@" in nodeid.rsplit("]", 1)[-1]


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Fail loudly if xdist ignored the groups (it did, silently, under pytest 9.2:
    pytest-xdist#1386): every group's servers would then start on several workers."""
    if node.config.getvalue("dist") == "loadgroup":
        ungrouped = [nodeid for nodeid in ids if not grouped(nodeid)]
        if ungrouped:
            pytest.exit(f"xdist ignored the test groups (e.g. {ungrouped[0]}): check the pins of "
                        "pytest and pytest-xdist in requirements-dev.in", returncode=3)  # fmt: skip


_CPU_MARK = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    item.stash[_CPU_MARK] = suite.tree_cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[pytest.TestReport]:
    """Each phase's report carries the CPU seconds its worker's process tree spent in it
    (servers the worker started included); xdist sends it to the controller with the rest."""
    report: pytest.TestReport = yield
    now = suite.tree_cpu_seconds()
    report.cpu = max(0.0, now - item.stash.get(_CPU_MARK, now))  # type: ignore[attr-defined]
    item.stash[_CPU_MARK] = now
    if report.when == "teardown" and suite.RUN_MARKER in os.environ:
        found = suite.orphans(os.environ[suite.RUN_MARKER])
        report.orphans = {str(pid): list(seen) for pid, seen in found.items()}  # type: ignore[attr-defined]
    return report


class TierTimes:
    """The time of each tier, printed at the end of the run (`.ci/run` shows it), so that
    growth is seen when it happens: the sum of its tests' setup, call and teardown, the CPU
    time they spent, and the span of wall time from its first test's start to its last
    test's end. Then the tests that spent the most CPU, since the cores are the limit."""

    def __init__(self, *, census: bool = False, record: str = "last-test-run.json") -> None:
        self.record = record
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.cpu_by_test: dict[str, float] = defaultdict(float)
        self.seconds_by_test: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)
        self.span: dict[str, list[float]] = {}
        # Processes whose parent had gone (pid -> the test that saw it first, its command
        # line, its CPU seconds when last seen): their CPU is in no test's.
        self.orphans: dict[str, list[Any]] = {}
        self.machine_at_start = suite.machine_cpu()
        self.census = CpuCensus() if census else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        parts = report.nodeid.split("/")
        tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"
        self.seconds[tier] += report.duration
        cpu = float(getattr(report, "cpu", 0.0))
        self.cpu[tier] += cpu
        self.cpu_by_test[report.nodeid.split("@")[0]] += cpu
        self.seconds_by_test[report.nodeid.split("@")[0]] += report.duration
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.tests[tier] += 1
        for pid, (argv, seconds) in getattr(report, "orphans", {}).items():
            seen = self.orphans.setdefault(pid, [report.nodeid.split("@")[0], argv, seconds])
            seen[2] = max(seen[2], seconds)
        start, stop = getattr(report, "start", 0.0), getattr(report, "stop", 0.0)
        if start and stop:
            first, last = self.span.setdefault(tier, [start, stop])
            self.span[tier] = [min(first, start), max(last, stop)]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.seconds:
            return
        terminalreporter.section("time by tier")
        terminalreporter.write_line(
            f"{'tier':10} {'tests':>6} {'test time':>10} {'cpu time':>10} {'wall span':>10}"
        )
        for tier in sorted(self.seconds, key=lambda t: -self.seconds[t]):
            first, last = self.span.get(tier, [0.0, 0.0])
            terminalreporter.write_line(
                f"{tier:10} {self.tests[tier]:6d} {_clock(self.seconds[tier]):>10} "
                f"{_clock(self.cpu[tier]):>10} {_clock(last - first):>10}"
            )
        terminalreporter.write_line(
            f"{'all':10} {'':6} {'':10} {_clock(sum(self.cpu.values())):>10}"
        )
        (busy_then, then), (busy_now, now) = self.machine_at_start, suite.machine_cpu()
        cores = os.cpu_count() or 1
        busy, available = busy_now - busy_then, (now - then) * cores
        terminalreporter.write_line(
            f"{'machine':10} {'':6} {'':10} {_clock(busy):>10}  busy of {_clock(available)} "
            f"on {cores} cores ({busy / max(available, 1e-9):.0%}): the tests, the processes "
            "that outlived them, and anything else"
        )
        terminalreporter.section("most cpu time (setup, call and teardown)")
        top = sorted(self.cpu_by_test.items(), key=lambda kv: -kv[1])[:25]
        for nodeid, cpu in top:
            terminalreporter.write_line(f"{_clock(cpu):>7}  {nodeid}")
        if self.census is not None:
            by_kind = self.census.stop()
            terminalreporter.section("cpu by kind of process, the whole machine (tests included)")
            for name, (cpu, count) in list(by_kind.items())[:20]:
                terminalreporter.write_line(f"{_clock(cpu):>7}  {count:4d}  {name}")
            record = {
                "cpu_by_test": dict(sorted(self.cpu_by_test.items(), key=lambda kv: -kv[1])),
                "seconds_by_test": self.seconds_by_test,
                "cpu_by_tier": self.cpu,
                "cpu_by_kind": by_kind,
                "machine_busy": busy,
            }
            path = PROJECT_DIR / "var" / self.record
            with contextlib.suppress(OSError):
                path.write_text(json.dumps(record, indent=1))
                terminalreporter.write_line(f"every test's cpu time: {path}")
        if self.orphans:
            orphaned = sorted(self.orphans.values(), key=lambda seen: -seen[2])
            terminalreporter.section(
                f"{len(orphaned)} processes outlived the process that started them "
                f"(cpu when last seen, {_clock(sum(seen[2] for seen in orphaned))} in all)"
            )
            for nodeid, argv, cpu in orphaned[:15]:
                terminalreporter.write_line(f"{_clock(cpu):>7}  {nodeid}\n         {argv}")


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


@pytest.fixture(scope="session")
def spark_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    var = tmp_path_factory.mktemp("spark-var")
    # Two shuffle partitions (and Delta log partitions), not the default 4: still more than
    # one, so that a fold that leans on one partition fails; 11% less CPU on tiny data.
    spark = {"master": "local[2]", "shuffle_partitions": 2}
    return load_settings(var_dir=var, jars_dir=JARS_DIR, spark=spark)


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[SparkSessions]:
    """The worker's classic Spark session, one for each set of jars (`SparkSessions`):
    starting a JVM costs seconds, so the tiers share one, and a module that needs other
    jars (the stores' connectors) gets a JVM of its own, the shared one started anew after
    it. Defined here once: a copy imported into another tier's conftest is a second fixture,
    and the second teardown found the JVM gone. Its JVM is stopped at the end, so a run
    without xdist workers leaves no process behind either."""
    yield SparkSessions()
    stop_jvm()


@pytest.fixture(scope="module")
def spark(spark_sessions: SparkSessions, spark_settings: Settings) -> SparkSession:
    """The shared session with ackfold's jars. Per module, not per run: the JVM of the
    module before may have been started with other jars."""
    return spark_sessions.get(spark_settings, app_name="ackfold-tests")


def stop_jvm(session: SparkSession | None = None) -> None:
    """Stop a classic session (the process's, if None) and its JVM, which the next session
    of the process starts anew."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = session or SparkSession._instantiatedSession
    if session is not None:
        session.stop()
    elif SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its parent's pipe closes
        gateway.proc.wait(timeout=60)
        # Both: a SparkConf is made on `_jvm` while it is set, the dead JVM's too.
        SparkContext._gateway = None
        SparkContext._jvm = None


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`make run` as a user starts it, shared by the Airflow, browser and docs tiers."""
    from tests.embedded_stack import embedded_stack

    with embedded_stack(tmp_path_factory.mktemp("stack-var")) as running:
        yield running


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ACKFOLD_* variable and no ackfold.yaml leaks into a test from the caller; no
    Airflow deployment either (an Airflow loaded by another test of the worker), and the
    user's state directory (the default var dir) is the test's own."""
    for name in list(os.environ):
        if name.startswith("ACKFOLD_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("ackfold.config.settings.airflow_home", lambda: None)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings in a fresh var dir that share the project's jar cache (no re-download)."""

    def make(**overrides: Any) -> Settings:
        overrides.setdefault("var_dir", tmp_path / "var")
        overrides.setdefault("jars_dir", JARS_DIR)
        return load_settings(**overrides)

    return make


_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))
    # A JVM a test started in this process outside the `spark` fixture (its own
    # `get_spark`): stopped here, not left to exit on its own once `os._exit` below has
    # closed its pipe, outside every test's time.
    if "pyspark" in sys.modules:
        from pyspark import SparkContext

        if SparkContext._gateway is not None:
            stop_jvm()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller stops the run's shared servers, then fails the run if any process a
    test started is still alive (and kills it). Every process leaves without interpreter
    teardown once delta-rs is loaded: it can abort there (exit 134, delta-rs#2184), which CI
    would read as a failed run after green tests."""
    ended = _exit_status[-1] if _exit_status else None
    status = ended
    if _is_controller(config) and suite.RUN_MARKER in os.environ:
        suite.stop_shared_servers()
        left = suite.leftovers(os.environ[suite.RUN_MARKER])
        if left:
            print("\nprocesses the tests left running (killed now):", file=sys.stderr)
            for pid, argv in sorted(left.items()):
                print(f"  {pid}: {argv}", file=sys.stderr)
            suite.kill(left)
            status = status or 1
        elif status is not None:
            print(f"no process left running ({time.strftime('%H:%M:%S')})")
    if status is not None and ("deltalake" in sys.modules or status != ended):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
