"""`ackfold roots` and `ackfold show`: the read-only commands, over real Delta tables, no JVM.

The CLI tests run the installed console script in subprocesses against ledgers written by
`tests.ledger_fixtures`. Starting the CLI costs most of a second, so every invocation is
declared in `_invocations` and run once, concurrently, by the `cli` fixture; each test then
asserts on the output of the invocations it names. delta-rs can abort at interpreter exit
(exit 134): `main()` must leave with `os._exit`, so a 134 here is a bug, never a result.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ackfold.cli import main as cli_module
from ackfold.ledger.errors import NoLedger, RootNotFound, UnknownApp
from ackfold.ledger.reading import parse
from ackfold.ledger.reading.parse import (
    DEFAULT_LIMIT,
    QueryError,
    RootQuery,
    parse_limit,
    parse_rate,
    parse_root_id,
    parse_statuses,
    parse_time,
)
from ackfold.ledger.reading.reader import PAYLOAD_PREVIEW, LedgerReader
from ackfold.ledger.reading.sql import Scan
from ackfold.ledger.schema import status, values
from ackfold.ledger.schema.ids import format_id, parse_id
from ackfold.ledger.schema.tables import (
    ACK_EVENTS,
    ROOT_STATE,
    ROOT_STATE_PARTITIONS,
    ROOTS,
    TABLES,
)
from ackfold.ledger.schema.values import hex64, iso, one_line
from tests.ledger_fixtures import (
    Sample,
    arrow_schema,
    bulk_ledger,
    partition_dates,
    sample_ledger,
    write_rows,
)

ACKFOLD = Path(sys.executable).parent / "ackfold"
DELTA_RS_ABORT = 134


@dataclass(frozen=True)
class Ledgers:
    sample: Sample
    missing: Path  # a warehouse with no tables
    empty: Path  # a warehouse whose root_state has no rows
    var: Path


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> Ledgers:
    base = tmp_path_factory.mktemp("ledgers")
    sample = sample_ledger(base / "sample")
    (base / "missing").mkdir()
    write_rows(base / "empty", ROOT_STATE, [])
    (base / "var").mkdir()
    return Ledgers(sample, base / "missing", base / "empty", base / "var")


@pytest.fixture(scope="module")
def sample(ledgers: Ledgers) -> Sample:
    return ledgers.sample


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Invocation = tuple[Path | str, list[str], int]


def _invocations(s: Sample, ledgers: Ledgers) -> dict[str, Invocation]:
    """The CLI calls run through the console script: name -> (warehouse, arguments, the
    exit code the command means). Each behaviour of the contract once; variants run
    in-process (`run_here`), to stay fast."""
    w = s.warehouse
    return {
        "roots": (w, ["roots"], 0),
        "roots_json": (w, ["roots", "--json"], 0),
        "roots_status": (
            w,
            ["roots", "--status", "failed,dead_lettered", "--status", "REPLAYED", "--json"],
            0,
        ),
        "roots_app": (w, ["roots", "--app", "clicks", "--json"], 0),
        "roots_since": (w, ["roots", "--since", "2026-11-21T09:00:00+01:00", "--json"], 0),
        "roots_limit": (w, ["roots", "--limit", "2"], 0),
        "bad_status": (w, ["roots", "--status", "failed,bogus"], 2),
        "bad_since": (w, ["roots", "--since", "yesterday"], 2),
        "negative_limit": (w, ["roots", "--limit", "-3"], 2),
        "unknown_app": (w, ["roots", "--app", "nope"], 1),
        "show_replayed": (w, ["show", str(s.replayed)], 0),
        "show_completed": (w, ["show", str(s.completed)], 0),
        "show_completed_json": (w, ["show", str(s.completed), "--json"], 0),
        "show_retry_json": (w, ["show", str(s.retry), "--json"], 0),
        "show_unknown": (w, ["show", "123"], 1),
        "show_not_a_number": (w, ["show", "12xyz"], 2),
        "roots_missing": (ledgers.missing, ["roots"], 1),
        "show_missing": (ledgers.missing, ["show", "1"], 1),
    }


@pytest.fixture(scope="module")
def cli(ledgers: Ledgers) -> dict[str, Run]:
    """Run every invocation once, concurrently, through the real console script."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env["ACKFOLD_VAR_DIR"] = str(ledgers.var)

    def call(item: tuple[str, Invocation]) -> tuple[str, Run]:
        name, (warehouse, args, _) = item
        done = subprocess.run(
            [str(ACKFOLD), *args],
            env={**env, "ACKFOLD_WAREHOUSE": str(warehouse)},
            cwd=ledgers.var,  # no stray ackfold.yaml
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode != DELTA_RS_ABORT, (
            f"`ackfold {' '.join(args)}` died in delta-rs' exit abort: main() must leave "
            f"with os._exit\n{done.stderr}"
        )
        return name, Run(tuple(args), done.returncode, done.stdout, done.stderr)

    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) * 2)) as pool:
        return dict(pool.map(call, _invocations(ledgers.sample, ledgers).items()))


def _one_error(run: Run, code: int) -> str:
    """The run failed with `code` and exactly one message line, no traceback."""
    assert run.code == code, (run.args, run.code, run.out, run.err)
    assert run.out == ""
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert "Traceback" not in run.err
    assert lines[0].startswith("ackfold: ")
    return lines[0]


@pytest.fixture
def run_here(
    clean_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ledgers: Ledgers,
) -> Callable[..., Run]:
    """`ackfold ARGS` in this process (the same parser and handlers, without the
    console script), for the variants of what the subprocess tests cover."""

    def run(warehouse: Path | str, *args: str) -> Run:
        monkeypatch.setenv("ACKFOLD_WAREHOUSE", str(warehouse))
        monkeypatch.setenv("ACKFOLD_VAR_DIR", str(ledgers.var))
        code = cli_module.run(list(args))
        out, err = capsys.readouterr()
        return Run(args, code, out, err)

    return run


def _ids(run: Run) -> list[int]:
    assert run.code == 0, run.err
    return [parse_id(item["root_id"]) for item in run.json()]


# --- ackfold roots ------------------------------------------------------------------------


def test_roots_prints_an_aligned_table_newest_last_event_first(
    cli: dict[str, Run], sample: Sample
) -> None:
    s = cli["roots"]
    assert s.code == 0, s.err
    assert s.err == ""
    lines = s.out.splitlines()
    assert lines[0].split() == [
        "ROOT_ID",
        "APP",
        "STATUS",
        "ATTEMPT",
        "LAST_STAGE",
        "EVENTS",
        "LAST_EVENT_AT",
        "FAIL_REASON",
    ]
    # Aligned: every column starts at the same offset on every line.
    for header in ("APP", "STATUS", "LAST_STAGE", "LAST_EVENT_AT"):
        column = lines[0].index(header)
        assert all(line[column - 2 : column] == "  " for line in lines[1:]), header
    ids = [parse_id(line.split()[0]) for line in lines[1:]]
    assert all(re.fullmatch(r"0x[0-9a-f]{16}", line.split()[0]) for line in lines[1:])
    assert ids == [
        sample.pending,
        sample.dead,
        sample.timed_out,
        sample.retry,
        sample.replayed,
        sample.completed,
    ]
    assert sample.unreconciled not in ids  # registered but not in root_state yet
    replayed = next(line for line in lines if line.split()[0] == format_id(sample.replayed))
    assert replayed.split()[1:7] == [
        "orders",
        "replayed",
        "1",
        "sink",
        "3",
        "2026-11-20T09:10:02.000Z",
    ]
    assert replayed.endswith("bad record: missing field 'sku'")


def test_roots_escapes_control_characters_in_the_table(cli: dict[str, Run]) -> None:
    s = cli["roots"]
    assert "\x1b" not in s.out
    dead = next(line for line in s.out.splitlines() if "dead_lettered" in line)
    assert dead.endswith("geo lookup failed\\n\\u001b[31mred\\u001b[0m")


def test_roots_json_is_an_array_of_root_states(cli: dict[str, Run], sample: Sample) -> None:
    s = cli["roots_json"]
    items = s.json()
    table_order = [line.split()[0] for line in cli["roots"].out.splitlines()[1:]]
    # Ids in JSON are the text people see: a JSON number loses 64 bits in JavaScript and jq.
    assert [item["root_id"] for item in items] == table_order
    by_id = {parse_id(item["root_id"]): item for item in items}
    replayed = by_id[sample.replayed]
    assert replayed["status"] == "replayed"
    assert replayed["fail_reason"] == "bad record: missing field 'sku'"
    assert re.fullmatch(r"0x[0-9a-f]{16}", replayed["xor_acc"])
    assert replayed["last_event_at"] == "2026-11-20T09:10:02.000000Z"
    assert replayed["first_event_date"] == "2026-11-20"
    assert by_id[sample.completed]["xor_acc"] == "0x0000000000000000"
    assert by_id[sample.retry]["origin_root_id"] == format_id(sample.replayed)
    # One root per line, so grep works too.
    assert len(s.out.splitlines()) == len(items) + 2


def test_roots_status_filter_takes_lists_and_repeats_case_insensitively(
    cli: dict[str, Run], sample: Sample
) -> None:
    assert _ids(cli["roots_status"]) == [sample.dead, sample.replayed]


def test_roots_app_filter(cli: dict[str, Run], sample: Sample) -> None:
    assert _ids(cli["roots_app"]) == [sample.dead, sample.timed_out]


def test_roots_since_honours_offsets_z_and_naive_utc(
    cli: dict[str, Run], run_here: Callable[..., Run], sample: Sample
) -> None:
    # 09:00+01:00 is 08:00Z: the replay's last event (08:00:05Z) is in.
    assert _ids(cli["roots_since"]) == [
        sample.pending,
        sample.dead,
        sample.timed_out,
        sample.retry,
    ]
    # A naive time is UTC: 08:00:06 leaves the replay out.
    naive = run_here(sample.warehouse, "roots", "--since", "2026-11-21 08:00:06", "--json")
    assert _ids(naive) == [sample.pending, sample.dead, sample.timed_out]
    z = run_here(sample.warehouse, "roots", "--since", "2026-11-22T11:00:00Z", "--json")
    assert _ids(z) == [sample.pending, sample.dead]


def test_roots_limit_keeps_the_newest_and_says_there_are_more(
    cli: dict[str, Run], sample: Sample
) -> None:
    s = cli["roots_limit"]
    assert s.code == 0
    assert [parse_id(line.split()[0]) for line in s.out.splitlines()[1:]] == [
        sample.pending,
        sample.dead,
    ]
    assert "showing the newest 2; more roots match" in s.err


def test_roots_with_no_match_prints_nothing_and_says_so(
    run_here: Callable[..., Run], sample: Sample
) -> None:
    s = run_here(sample.warehouse, "roots", "--app", "orders", "--status", "timed_out")
    assert (s.code, s.out) == (0, "")
    assert s.err.strip() == "ackfold: no roots match"


def test_roots_rejects_an_unknown_status_and_lists_the_valid_ones(cli: dict[str, Run]) -> None:
    line = _one_error(cli["bad_status"], 2)
    assert "unknown status 'bogus'" in line
    assert line.endswith("valid statuses are " + ", ".join(status.ALL))


def test_roots_rejects_a_malformed_since(cli: dict[str, Run]) -> None:
    line = _one_error(cli["bad_since"], 2)
    assert line == (
        "ackfold: --since 'yesterday' is not an ISO-8601 time, e.g. 2026-11-22T10:00:00Z"
    )


def test_roots_rejects_a_limit_out_of_range(
    cli: dict[str, Run], run_here: Callable[..., Run], sample: Sample
) -> None:
    line = _one_error(cli["negative_limit"], 2)
    assert line == "ackfold: --limit must be from 1 to 10,000,000 roots, got -3"
    line = _one_error(run_here(sample.warehouse, "roots", "--limit", "0"), 2)
    assert line == "ackfold: --limit must be from 1 to 10,000,000 roots, got 0"
    line = _one_error(run_here(sample.warehouse, "roots", "--limit", "lots"), 2)
    assert line == "ackfold: --limit 'lots' is not a whole number"
    # Past a 64-bit integer: the input is blamed, not the ledger ("Optimizer rule failed").
    line = _one_error(run_here(sample.warehouse, "roots", "--limit", str(1 << 63)), 2)
    assert line == "ackfold: --limit must be from 1 to 10,000,000 roots, got 9223372036854775808"


@pytest.mark.parametrize(
    "since", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01", "9999-12-31"]
)
def test_roots_blames_a_time_at_the_calendars_edge_not_the_ledger(
    run_here: Callable[..., Run], sample: Sample, since: str
) -> None:
    line = _one_error(run_here(sample.warehouse, "roots", "--since", since), 2)
    assert line == (
        f"ackfold: --since '{since}' is out of range: give a time from 1970-01-01 up to "
        "2200-01-01 (UTC)"
    )


def test_roots_of_an_unknown_app_lists_the_known_apps(cli: dict[str, Run]) -> None:
    line = _one_error(cli["unknown_app"], 1)
    assert line == "ackfold: no root of app nope; known apps: clicks, orders"


def test_roots_without_a_ledger_says_how_to_make_one(
    cli: dict[str, Run], run_here: Callable[..., Run], ledgers: Ledgers
) -> None:
    line = _one_error(cli["roots_missing"], 1)
    assert line.startswith(f"ackfold: no ledger at {ledgers.missing}")
    assert "run `ackfold reconcile` after an app has written events" in line
    line = _one_error(run_here(ledgers.empty, "roots"), 1)
    assert line.startswith(f"ackfold: no ledger at {ledgers.empty}")
    assert "holds no roots yet" in line
    assert "ackfold reconcile" in line


# --- ackfold show -------------------------------------------------------------------------


def test_show_prints_state_events_by_stage_and_attempts(
    cli: dict[str, Run], sample: Sample
) -> None:
    s = cli["show_replayed"]
    assert s.code == 0, s.err
    out = s.out
    assert out.startswith(f"root {format_id(sample.replayed)}\n")
    assert re.search(r"^  status +replayed \(since 2026-11-20T09:10:02.000Z\)$", out, re.M)
    xor = _xor(sample, sample.replayed)
    assert xor != 0
    assert re.search(rf"^  xor_acc +{hex64(xor)} \(init seen, tree incomplete\)$", out, re.M)
    assert re.search(rf"^  attempt +1 of origin {format_id(sample.replayed)}$", out, re.M)
    assert re.search(r"^  last stage +sink$", out, re.M)
    assert re.search(
        r"^  fail reason +bad record: missing field 'sku' "
        r"\(stage sink at 2026-11-20T09:10:02.000Z\)$",
        out,
        re.M,
    )
    assert re.search(r"^  source +sqs queue orders-in message m-2$", out, re.M)
    # Events grouped by stage, stages in the order they were reached, times ascending.
    events = out.split("events by stage (3 in ack_events)\n")[1].split("\n\n")[0]
    assert [line.strip() for line in events.splitlines() if not line.startswith("    ")] == [
        "spout",
        "parse",
        "sink",
    ]
    rows = [line.split() for line in events.splitlines() if line.startswith("    ")]
    assert [(r[0], r[1]) for r in rows] == [
        ("2026-11-20T09:10:00.000Z", "init"),
        ("2026-11-20T09:10:01.000Z", "ack"),
        ("2026-11-20T09:10:02.000Z", "fail"),
    ]
    expected_vals = [hex64(e["ack_val"]) for e in sample.events[sample.replayed]]
    assert [r[2] for r in rows] == expected_vals
    assert events.splitlines()[-1].endswith("reason: bad record: missing field 'sku'")
    # The attempts: this root (marked) and its replay, each with its status.
    after = out.split(f"attempts (origin {format_id(sample.replayed)})\n")[1]
    attempts = after.split("\n\n")[0].splitlines()  # the effects section follows
    assert [line.split()[:4] for line in attempts] == [
        ["*", "#1", format_id(sample.replayed), "replayed"],
        ["#2", format_id(sample.retry), "completed", "ingested"],
    ]


def test_show_caps_the_payload_and_marks_duplicate_events(
    cli: dict[str, Run], sample: Sample
) -> None:
    s = cli["show_completed"]
    assert s.code == 0, s.err
    assert sample.payload not in s.out
    line = next(line for line in s.out.splitlines() if line.startswith("  payload"))
    preview = sample.payload[:PAYLOAD_PREVIEW]
    assert line == (
        f"  payload       {preview}... (truncated: first {PAYLOAD_PREVIEW} of "
        f"{len(sample.payload)} chars)"
    )
    assert s.out.count("(duplicate, not folded)") == 1
    assert "events by stage (4 in ack_events)" in s.out
    assert re.search(r"^  xor_acc +0x0000000000000000 \(init seen, tree complete\)$", s.out, re.M)


def test_show_escapes_control_characters(run_here: Callable[..., Run], sample: Sample) -> None:
    s = run_here(sample.warehouse, "show", str(sample.dead))
    assert s.code == 0, s.err
    assert "\x1b" not in s.out
    assert "reason: geo lookup failed\\n\\u001b[31mred\\u001b[0m" in s.out
    assert re.search(r"^  source +kafka queue clicks message c-7 position clicks:1:7$", s.out, re.M)


def test_show_counts_events_not_reconciled_yet(
    run_here: Callable[..., Run], sample: Sample
) -> None:
    s = run_here(sample.warehouse, "show", str(sample.pending))
    assert s.code == 0, s.err
    assert re.search(r"^  +1 more in ack_events, not reconciled yet$", s.out, re.M)
    assert "events by stage (2 in ack_events)" in s.out
    assert re.search(r"^  payload +-$", s.out, re.M)


def test_show_json_has_the_journey(cli: dict[str, Run], sample: Sample) -> None:
    s = cli["show_retry_json"]
    assert s.code == 0, s.err
    journey = s.json()
    assert journey["root_id"] == journey["state"]["root_id"] == format_id(sample.retry)
    assert "root_id_hex" not in journey, "one form"
    assert journey["state"]["status"] == "completed"
    assert journey["state"]["attempt"] == 2
    assert journey["state"]["xor_acc"] == "0x0000000000000000"
    assert journey["origin_root_id"] == format_id(sample.replayed)
    assert [(a["root_id"], a["attempt"], a["status"]) for a in journey["attempts"]] == [
        (format_id(sample.replayed), 1, "replayed"),
        (format_id(sample.retry), 2, "completed"),
    ]
    assert [stage["stage"] for stage in journey["stages"]] == ["spout", "parse", "sink"]
    first = journey["stages"][0]["events"][0]
    assert first["kind"] == "init"
    assert first["event_time"] == "2026-11-21T08:00:00.000000Z"
    assert re.fullmatch(r"0x[0-9a-f]{16}", first["ack_val"])
    assert journey["source"]["payload_preview"] == '{"order": 2}'
    assert journey["source"]["payload_truncated"] is False
    assert journey["unreconciled_events"] == 0


def test_show_json_never_carries_the_whole_payload(cli: dict[str, Run], sample: Sample) -> None:
    source = cli["show_completed_json"].json()["source"]
    assert sample.payload not in cli["show_completed_json"].out
    assert source["payload_preview"] == sample.payload[:PAYLOAD_PREVIEW]
    assert source["payload_chars"] == len(sample.payload)
    assert source["payload_truncated"] is True


def test_show_of_an_unknown_root_names_the_table(
    cli: dict[str, Run], run_here: Callable[..., Run], ledgers: Ledgers
) -> None:
    w = ledgers.sample.warehouse
    shown = format_id(123)
    assert _one_error(cli["show_unknown"], 1) == f"ackfold: no root {shown} in {w}/root_state"
    # A negative id is an id, not an option.
    negative = run_here(w, "show", "-5")
    assert _one_error(negative, 1) == f"ackfold: no root {format_id(-5)} in {w}/root_state"


def test_show_takes_every_form_of_an_id(run_here: Callable[..., Run], sample: Sample) -> None:
    unsigned = sample.retry & ((1 << 64) - 1)
    for form in (
        format_id(sample.retry),
        format_id(sample.retry)[2:],
        str(sample.retry),
        str(unsigned),
    ):
        s = run_here(sample.warehouse, "show", form, "--json")
        assert s.code == 0, (form, s.err)
        assert s.json()["root_id"] == format_id(sample.retry)


def test_show_of_a_root_not_reconciled_yet_says_so(
    run_here: Callable[..., Run], ledgers: Ledgers
) -> None:
    root = ledgers.sample.unreconciled
    line = _one_error(run_here(ledgers.sample.warehouse, "show", str(root)), 1)
    shown = format_id(root)
    assert line.startswith(f"ackfold: no root {shown} in {ledgers.sample.warehouse}/root_state")
    assert "registered in roots but not reconciled yet: run `ackfold reconcile`" in line


def test_show_rejects_a_non_numeric_root_id(cli: dict[str, Run]) -> None:
    line = _one_error(cli["show_not_a_number"], 2)
    assert "root id '12xyz' is not a 64-bit id" in line


def test_show_without_a_ledger_says_how_to_make_one(cli: dict[str, Run], ledgers: Ledgers) -> None:
    line = _one_error(cli["show_missing"], 1)
    assert line.startswith(f"ackfold: no ledger at {ledgers.missing}")
    assert "ackfold reconcile" in line


def test_a_reader_that_stops_early_is_not_an_error(
    bulk: tuple[str, list[list[int]]], ledgers: Ledgers
) -> None:
    """`ackfold roots | head -1`: no BrokenPipeError traceback, the command's exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACKFOLD_")}
    env.update(ACKFOLD_VAR_DIR=str(ledgers.var), ACKFOLD_WAREHOUSE=bulk[0])
    with subprocess.Popen(
        [str(ACKFOLD), "roots", "--limit", "1800"],  # ~200 kB, more than a pipe holds
        env=env,
        cwd=ledgers.var,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.readline().startswith("ROOT_ID             APP")
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert code == 0, err
    assert "Traceback" not in err


def test_help_names_the_statuses_and_the_default_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli_module.build_parser().parse_args(["roots", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(status.ALL) in text
    assert f"(default {DEFAULT_LIMIT})" in text


def test_every_command_leaves_with_its_own_exit_code(cli: dict[str, Run], ledgers: Ledgers) -> None:
    # Without os._exit, delta-rs can abort a read at interpreter exit (134); the `cli`
    # fixture fails on any 134, and here every code is the one the command meant.
    expected = {name: call[2] for name, call in _invocations(ledgers.sample, ledgers).items()}
    assert {name: run.code for name, run in cli.items()} == expected


# --- the ledger reader, directly ----------------------------------------------------------


@pytest.fixture(scope="module")
def reader(ledgers: Ledgers) -> LedgerReader:
    return LedgerReader(ledgers.sample.warehouse)


def test_parse_time_accepts_z_offsets_dates_and_naive_utc() -> None:
    assert parse_time("2026-11-22T10:00:00Z") == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert parse_time("2026-11-22T12:30:00+02:30") == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert parse_time("2026-11-22T10:00:00") == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert parse_time(" 2026-11-22 ") == datetime(2026, 11, 22, tzinfo=UTC)
    assert parse_time("2026-11-22T10:00:00.5-01:00").microsecond == 500000
    for bad in ("", "yesterday", "2026-13-01", "2026-11-22T25:00", "1h"):
        with pytest.raises(
            QueryError, match=r"is not an ISO-8601 time, e\.g\. 2026-11-22T10:00:00Z"
        ):
            parse_time(bad)


def test_parse_statuses_checks_against_status_all() -> None:
    assert parse_statuses(["Failed , timed_out,", "failed", "pending"]) == (
        "failed",
        "timed_out",
        "pending",
    )
    with pytest.raises(QueryError, match="unknown status 'done': valid statuses are pending, "):
        parse_statuses(["done"])
    with pytest.raises(QueryError, match="needs at least one status"):
        parse_statuses([" , "])


def test_parse_time_is_bounded_to_1970_up_to_2200_utc() -> None:
    assert parse_time("1970-01-01T00:00:00Z") == parse.EARLIEST
    assert parse_time("1969-12-31T23:30:00-01:00") == datetime(1970, 1, 1, 0, 30, tzinfo=UTC)
    assert parse_time("2200-01-01T00:30:00+01:00") == datetime(2199, 12, 31, 23, 30, tzinfo=UTC)
    for edge in ("1969-12-31T23:59:59Z", "2200-01-01", "2200-01-01T01:30:00+01:00",
                 "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999-14:00"):  # fmt: skip
        with pytest.raises(QueryError, match=r"out of range: give a time from 1970-01-01 up to"):
            parse_time(edge, "since")


def test_parse_rate_is_one_range_for_every_entry_point() -> None:
    assert parse.MIN_RATE == 0.1
    assert parse.MAX_RATE == 100_000
    assert parse_rate("0.1") == 0.1
    assert parse_rate(100_000) == 100_000.0
    for bad in ("1e-320", "0", "-5", "0.09", "100001", "inf", "nan", 10**400, float("nan")):
        with pytest.raises(
            QueryError, match=r"--rate must be from 0\.1 to 100,000 messages per second, got"
        ):
            parse_rate(bad)
    with pytest.raises(QueryError, match="--rate 'fast' is not a number"):
        parse_rate("fast")
    with pytest.raises(QueryError) as huge:
        parse_rate(10**400)
    assert len(str(huge.value)) < 120, "an error quotes the value, cut"


def test_parse_limit_and_root_id() -> None:
    assert parse_limit("7") == 7
    assert parse_limit(parse.MAX_LIMIT) == 10_000_000
    for bad in ("0", "-1", "10000001", "3000000000"):
        with pytest.raises(QueryError, match="must be from 1 to 10,000,000 roots"):
            parse_limit(bad)
    with pytest.raises(QueryError, match="not a whole number"):
        parse_limit("ten")
    assert parse_root_id("-9223372036854775808") == -(1 << 63)
    assert parse_root_id("+17") == 17
    assert parse_root_id(hex64(-2)) == -2
    assert parse_root_id("0x2A") == 42
    assert parse_root_id(str(1 << 63)) == -(1 << 63), "unsigned decimal"
    with pytest.raises(QueryError, match="out of range"):
        parse_root_id(str(1 << 64))
    with pytest.raises(QueryError, match="out of range"):
        parse_root_id("0x12345678901234567")
    for bad in ("", "xyz", "1.5", "0x"):
        with pytest.raises(QueryError, match="is not a 64-bit id"):
            parse_root_id(bad)


def test_root_query_parse_defaults_and_checks() -> None:
    assert RootQuery.parse() == RootQuery(limit=50)
    query = RootQuery.parse(statuses=["failed"], app=" orders ", since="2026-11-22", limit="5")
    assert query == RootQuery(("failed",), "orders", datetime(2026, 11, 22, tzinfo=UTC), 5)
    with pytest.raises(QueryError, match="--app needs an app name"):
        RootQuery.parse(app=" ")


def test_output_helpers() -> None:
    assert hex64(-1) == "0xffffffffffffffff"
    assert iso(datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)) == "2026-01-02T03:04:05.678Z"
    tz = datetime(2026, 1, 2, 4, 4, 5, tzinfo=UTC).astimezone(timezone(timedelta(hours=1)))
    assert iso(tz, precise=True) == "2026-01-02T04:04:05.000000Z"
    assert iso(None) == "-"
    assert one_line("a\tb\u202ec") == "a\\tb\\u202ec"
    assert one_line("abcdef", width=5) == "ab..."
    assert one_line(None) == "-"


def test_list_roots_reads_the_sample(reader: LedgerReader, ledgers: Ledgers) -> None:
    s = ledgers.sample
    page = reader.list_roots(RootQuery(limit=3))
    assert [r.root_id for r in page.roots] == [s.pending, s.dead, s.timed_out]
    assert page.more
    root = page.roots[1]
    assert (root.app, root.status, root.last_stage, root.fail_stage) == (
        "clicks",
        "dead_lettered",
        "enrich",
        "enrich",
    )
    assert root.last_event_at.tzinfo is not None
    assert root.first_event_date == date(2026, 11, 22)
    page = reader.list_roots(RootQuery(statuses=("completed",), app="orders"))
    assert [r.root_id for r in page.roots] == [s.retry, s.completed]
    assert not page.more


def test_list_roots_errors(ledgers: Ledgers) -> None:
    with pytest.raises(UnknownApp, match="no root of app x; known apps: clicks, orders"):
        LedgerReader(ledgers.sample.warehouse).list_roots(RootQuery(app="x"))
    with pytest.raises(NoLedger, match="no table root_state"):
        LedgerReader(str(ledgers.missing)).list_roots(RootQuery())
    with pytest.raises(NoLedger, match="holds no roots yet"):
        LedgerReader(str(ledgers.empty)).list_roots(RootQuery(app="x"))


def test_show_root_builds_the_journey(reader: LedgerReader, ledgers: Ledgers) -> None:
    s = ledgers.sample
    journey = reader.show_root(s.completed)
    assert journey.state.status == "completed"
    assert [stage for stage, _ in journey.stages] == ["spout", "parse", "sink"]
    assert [e.duplicate for e in journey.events] == [False, False, False, True]
    assert journey.unreconciled == 0
    assert journey.source is not None
    assert journey.source.payload_preview == s.payload[:PAYLOAD_PREVIEW]
    assert journey.source.payload_chars == len(s.payload)
    assert journey.attempts[0].root_id == s.completed
    assert reader.show_root(s.pending).unreconciled == 1
    journey = reader.show_root(s.timed_out)
    assert journey.source is not None
    assert journey.source.source_position == "clicks:0:42"
    assert journey.source.payload_preview is None
    with pytest.raises(RootNotFound, match="registered in roots but not reconciled yet"):
        reader.show_root(s.unreconciled)
    with pytest.raises(RootNotFound, match=r"^no root 0x000000000000002a in .*/root_state$"):
        reader.show_root(42)


def test_show_root_finds_a_state_outside_the_expected_partition(tmp_path: Path) -> None:
    """The partition guess from the events' dates is a shortcut, never a filter."""
    at = datetime(2026, 5, 1, 12, tzinfo=UTC)
    event = {
        "event_id": "e1",
        "app": "a",
        "root_id": 7,
        "kind": "init",
        "ack_val": 3,
        "stage": "spout",
        "event_time": at,
    }
    write_rows(tmp_path, ACK_EVENTS, [event])
    row = _state_row(7, at, first_event_date=date(2026, 6, 1))
    write_rows(tmp_path, ROOT_STATE, [row, _state_row(8, at, first_event_date=at.date())])
    reader = LedgerReader(str(tmp_path))
    journey = reader.show_root(7)
    assert journey.state.first_event_date == date(2026, 6, 1)
    assert journey.source is None  # no roots table at all
    assert [a.root_id for a in journey.attempts] == [7]
    # The look-ups of the root (not the reads of why it is pending, `ledger.pending`).
    state_scans = [s.sql for s in reader.scans if s.table == ROOT_STATE and "root_id IN" in s.sql]
    assert len(state_scans) == 2
    assert "first_event_date BETWEEN DATE '2026-05-01' AND DATE '2026-05-01'" in state_scans[0]
    assert "first_event_date" not in state_scans[1].split(" WHERE ")[1]


def test_values_reach_the_sql_quoted(tmp_path: Path) -> None:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    row = {**_state_row(1, at, first_event_date=at.date()), "app": "it's"}
    write_rows(tmp_path, ROOT_STATE, [row])
    reader = LedgerReader(str(tmp_path))
    assert [r.app for r in reader.list_roots(RootQuery(app="it's")).roots] == ["it's"]
    with pytest.raises(UnknownApp, match="known apps: it's"):
        reader.list_roots(RootQuery(app="x' OR '1'='1"))


# --- scale: pruning on a larger ledger ---------------------------------------------------


@pytest.fixture(scope="module")
def bulk(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[list[int]]]:
    warehouse = tmp_path_factory.mktemp("bulk")
    days = bulk_ledger(warehouse, roots_per_day=300, days=6)
    return str(warehouse), days


def _files_opened(reader: LedgerReader, sql_of: Scan) -> int:
    plan = reader.explain(sql_of)
    counts = [int(n) for n in re.findall(r"files_opened=(\d+)", plan)]
    assert counts, plan
    return sum(counts)


def _full_scan(table: str) -> Scan:
    return Scan(table, f"SELECT root_id FROM {table}", 0)


def test_list_roots_matches_a_full_sort_and_reads_only_the_newest_files(
    bulk: tuple[str, list[list[int]]],
) -> None:
    warehouse, _ = bulk
    everything = LedgerReader(warehouse).list_roots(RootQuery(limit=100_000)).roots
    assert len(everything) == 1800
    newest_first = sorted(everything, key=lambda r: (-r.last_event_at.timestamp(), r.root_id))
    assert everything == newest_first
    cases = [
        RootQuery(limit=10),
        RootQuery(limit=500),
        RootQuery(statuses=("dead_lettered",), limit=40),
        RootQuery(statuses=("failed",), app="clicks", limit=400),
        RootQuery(since=datetime(2026, 10, 3, 12, tzinfo=UTC), limit=1000),
    ]
    for query in cases:
        expected = [
            r
            for r in everything
            if (not query.statuses or r.status in query.statuses)
            and (query.app is None or r.app == query.app)
            and (query.since is None or r.last_event_at >= query.since)
        ]
        page = LedgerReader(warehouse).list_roots(query)
        assert page.roots == expected[: query.limit], query
        assert page.more == (len(expected) > query.limit), query
    reader = LedgerReader(warehouse)
    reader.list_roots(RootQuery(limit=10))
    assert len(reader.scans) == 1
    assert _files_opened(reader, reader.scans[0]) < _files_opened(reader, _full_scan(ROOT_STATE))


def test_show_root_prunes_partitions_and_old_event_files(
    bulk: tuple[str, list[list[int]]],
) -> None:
    warehouse, days = bulk
    assert len(partition_dates(warehouse)) == 6
    root = days[4][17]
    reader = LedgerReader(warehouse)
    journey = reader.show_root(root)
    assert journey.state.root_id == root
    assert [e.kind for e in journey.events] == ["init", "ack"]
    assert [a.root_id for a in journey.attempts] == [root]
    state_scans = [scan for scan in reader.scans if scan.table == ROOT_STATE]
    assert len(state_scans) == 1  # found in the partition its events span
    full = _files_opened(reader, _full_scan(ROOT_STATE))
    assert _files_opened(reader, state_scans[0]) < full
    event_scan = next(scan for scan in reader.scans if scan.table == ACK_EVENTS)
    assert "event_time >= TIMESTAMP" in event_scan.sql
    assert _files_opened(reader, event_scan) < _files_opened(reader, _full_scan(ACK_EVENTS))


# --- the fixtures' schemas ---------------------------------------------------------------


def test_fixture_tables_have_the_schemas_of_tables_py(ledgers: Ledgers) -> None:
    from deltalake import DeltaTable

    for name in (ACK_EVENTS, ROOTS, ROOT_STATE):
        table = DeltaTable(f"{ledgers.sample.warehouse}/{name}")
        ddl_names = [line.split()[0] for line in TABLES[name][0].strip().splitlines()]
        fields = table.schema().fields
        assert [f.name for f in fields] == ddl_names
        assert [f.name for f in fields if not f.nullable] == [
            f.name for f in arrow_schema(name) if not f.nullable
        ]
        assert table.metadata().partition_columns == (
            list(ROOT_STATE_PARTITIONS) if name == ROOT_STATE else []
        )
        assert table.protocol().min_reader_version == 1
    assert partition_dates(ledgers.sample.warehouse) == [
        date(2026, 11, 20),
        date(2026, 11, 21),
        date(2026, 11, 22),
    ]


def test_doctests() -> None:
    for module in (parse, values):
        result = doctest.testmod(module)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, module.__name__


# --- helpers --------------------------------------------------------------------------------


def _xor(sample: Sample, root: int) -> int:
    acc = 0
    seen = set()
    for event in sample.events[root]:
        if event["event_id"] not in seen:
            seen.add(event["event_id"])
            acc ^= event["ack_val"]
    return acc


def _state_row(root: int, at: datetime, *, first_event_date: date) -> dict[str, Any]:
    return {
        "root_id": root,
        "app": "a",
        "status": "pending",
        "xor_acc": 3,
        "event_count": 1,
        "first_event_at": at,
        "last_event_at": at,
        "status_changed_at": at,
        "attempt": 1,
        "origin_root_id": root,
        "last_stage": "spout",
        "init_seen": True,
        "seen_event_hashes": [1],
        "reconciled_at": at,
        "first_event_date": first_event_date,
    }


def test_a_table_looked_up_as_optional_is_still_required_later(tmp_path: Path) -> None:
    reader = LedgerReader(str(tmp_path / "no-warehouse"))
    assert reader.table(ROOTS, required=False) is None
    with pytest.raises(NoLedger, match="no table roots"):
        reader.table(ROOTS, required=True)


def test_roots_and_show_mask_what_the_ui_masks(
    run_here: Callable[..., Run], sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACKFOLD_UI__REDACT_PATTERNS", "[\"missing field '\\\\w+'\"]")
    shown = run_here(sample.warehouse, "show", str(sample.replayed))
    listed = run_here(sample.warehouse, "roots", "--json")
    for run in (shown, listed):
        assert run.code == 0, run.err
        assert "'sku'" not in run.out
        assert "bad record: ***" in run.out


# --- ackfold quality: what it refuses before starting a JVM ----------------------------


def test_quality_refuses_bad_input_and_a_missing_ledger_without_a_jvm(
    run_here: Callable[..., Run], ledgers: Ledgers, sample: Sample
) -> None:
    line = _one_error(run_here(sample.warehouse, "quality", "--now", "yesterday"), 2)
    assert line.startswith("ackfold: --now 'yesterday' is not an ISO-8601 time")
    for command in ("quality", "reconcile"):
        edge = run_here(sample.warehouse, command, "--now", "0001-01-01T00:00:00+01:00")
        line = _one_error(edge, 2)
        assert line.startswith("ackfold: --now '0001-01-01T00:00:00+01:00' is out of range")
    line = _one_error(run_here(sample.warehouse, "quality", "--app", "bad name!"), 2)
    assert "is not an app name" in line
    line = _one_error(run_here(sample.warehouse, "quality", "--app", "nope"), 1)
    assert line.startswith("ackfold: unknown app 'nope': no event of it in the ledger")
    line = _one_error(run_here(ledgers.missing, "quality"), 1)
    assert line.startswith(f"ackfold: no ledger at {ledgers.missing}")
