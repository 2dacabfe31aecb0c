"""The manual replay's conf -> ReplayRequest: every bad field named, typed values only."""

from __future__ import annotations

import doctest
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from ackfold.replay import params
from ackfold.replay.params import (
    CONF_KEYS,
    MAX_ROOT_IDS,
    ReplayParamsError,
    conf_from_request,
    parse_replay_conf,
)
from ackfold.replay.request import DEFAULT_STATUSES, ReplayRequest

APPS = ["wordcount", "orders"]


def parse(conf: dict[str, Any], **kwargs: Any) -> ReplayRequest:
    return parse_replay_conf(conf, apps=APPS, **kwargs)


def problems(conf: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ReplayParamsError) as error:
        parse(conf)
    return error.value.problems


def test_an_empty_conf_is_a_dry_run_of_the_default_statuses() -> None:
    request = parse({})
    assert request.dry_run is True
    assert request.statuses == DEFAULT_STATUSES
    assert (request.root_ids, request.app, request.limit, request.rate) == ((), None, None, None)
    assert request.requested_by == "airflow"
    assert not request.automatic


def test_a_full_conf_becomes_typed_values() -> None:
    request = parse(
        {
            "root_ids": ["-42", " 0x000000000000002a ", "0xffffffffffffffff", "-42"],
            "app": "orders",
            "statuses": ["dead_lettered", "failed", "failed"],
            "since": "2026-11-22T10:00:00+01:00",
            "until": "2026-11-23T00:00:00Z",
            "limit": 7,
            "rate": 2,
            "dry_run": False,
        },
        requested_by="airflow:alice",
    )
    assert request.root_ids == (-42, 42, -1), "parsed, duplicates dropped, order kept"
    assert request.app == "orders"
    assert request.statuses == ("dead_lettered", "failed")
    assert request.since == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    assert request.until == datetime(2026, 11, 23, tzinfo=UTC)
    assert (request.limit, request.rate, request.dry_run) == (7, 2.0, False)
    assert isinstance(request.rate, float)
    assert request.requested_by == "airflow:alice"


def test_nulls_mean_no_filter_and_the_defaults() -> None:
    assert parse(dict.fromkeys(CONF_KEYS)) == parse({})


def test_every_bad_field_is_named_with_its_fix_in_one_error() -> None:
    found = problems(
        {
            "root_id": ["1"],
            "root_ids": ["12xyz", 5],
            "app": "nope",
            "statuses": ["completed"],
            "since": "yesterday",
            "limit": 0,
            "rate": -1,
            "dry_run": "no",
        }
    )
    assert set(found) == {
        "root_id", "root_ids", "app", "statuses", "since", "limit", "rate", "dry_run"
    }  # fmt: skip
    assert "did you mean root_ids?" in found["root_id"]
    assert "'12xyz' is not a 64-bit id" in found["root_ids"]
    assert "5 is not a string: give root ids as strings" in found["root_ids"]
    assert "use one of orders, wordcount, or null" in found["app"]
    assert "choose from failed, timed_out, dead_lettered" in found["statuses"]
    assert "not an ISO-8601 time, e.g." in found["since"]
    assert found["limit"] == "must be from 1 to 10,000,000 roots, got 0"
    assert "from 1 to" in problems({"limit": 2**40})["limit"], "Spark's limit is 32-bit"
    assert found["rate"] == "must be from 0.1 to 100,000 messages per second, got -1"
    assert "true or false" in found["dry_run"]


def test_the_message_names_the_fields_on_its_first_line_and_survives_pickling() -> None:
    with pytest.raises(ReplayParamsError) as error:
        parse({"limit": True, "rate": float("inf")})
    first, *rest = str(error.value).splitlines()
    assert first == "invalid manual replay request (limit, rate):"
    assert len(rest) == 2
    copy = pickle.loads(pickle.dumps(error.value))
    assert str(copy) == str(error.value)


@pytest.mark.parametrize(
    ("conf", "field", "says"),
    [
        ({"root_ids": "42"}, "root_ids", "must be a list"),
        ({"root_ids": [str(i) for i in range(MAX_ROOT_IDS + 1)]}, "root_ids", "more than"),
        ({"root_ids": ["99999999999999999999"]}, "root_ids", "out of range"),
        ({"statuses": []}, "statuses", "non-empty list"),
        ({"since": 1700000000}, "since", "ISO-8601 time string"),
        ({"limit": 2.5}, "limit", "whole number"),
        ({"rate": "10"}, "rate", "number of messages per second"),
        # JSON numbers past a float: refused, never an uncaught OverflowError.
        ({"rate": 10**400}, "rate", "must be from 0.1 to 100,000 messages per second, got 1000"),
        ({"rate": 1e-320}, "rate", "must be from 0.1 to 100,000 messages per second"),
        ({"since": "0001-01-01T00:00:00+01:00"}, "since", "is out of range: give a time from"),
        ({"until": "9999-12-31T23:59:59Z"}, "until", "is out of range: give a time from 1970"),
        ({"app": ""}, "app", "is not a configured app"),
        (
            {"app": "orders", "since": "2026-11-23T00:00:00Z", "until": "2026-11-22T00:00:00Z"},
            "until",
            "must be after since",
        ),
    ],
)
def test_each_kind_of_bad_value_is_rejected(conf: dict[str, Any], field: str, says: str) -> None:
    found = problems(conf)
    assert says in found[field], found


def test_sending_with_no_selector_at_all_needs_a_limit() -> None:
    found = problems({"dry_run": False})
    assert list(found) == ["limit"]
    assert "set a limit" in found["limit"]
    assert parse({"dry_run": False, "limit": 10}).limit == 10
    assert parse({"dry_run": False, "app": "wordcount"}).app == "wordcount"
    assert parse({"dry_run": False, "root_ids": ["1"]}).root_ids == (1,)
    assert parse({"dry_run": False, "since": "2026-11-22T00:00:00Z"}).since is not None
    assert parse({}).dry_run, "a dry run may look at everything"


def test_conf_from_request_is_json_ready_and_parses_back_to_the_same_request() -> None:
    import json

    request = ReplayRequest(
        root_ids=(-1, 2**63 - 1),
        app="wordcount",
        statuses=("timed_out",),
        since=datetime(2026, 11, 22, 10, tzinfo=UTC),
        until=datetime(2026, 11, 23, tzinfo=UTC),
        limit=3,
        rate=0.5,
        dry_run=False,
        requested_by="airflow:bob",
    )
    conf = conf_from_request(request)
    assert tuple(conf) == CONF_KEYS
    assert conf["root_ids"] == ["0xffffffffffffffff", "0x7fffffffffffffff"]  # as ids are shown
    assert parse(json.loads(json.dumps(conf)), requested_by="airflow:bob") == request


def test_an_automatic_request_has_no_manual_conf() -> None:
    with pytest.raises(ValueError, match="automatic"):
        conf_from_request(ReplayRequest(automatic=True, requested_by="auto"))


def test_docstring_examples_run() -> None:
    assert doctest.testmod(params, optionflags=doctest.ELLIPSIS).failed == 0
