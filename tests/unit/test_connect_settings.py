"""Spark Connect without a server: the `spark.remote` setting, its URL's parts, the
session settings a client may set, the Airflow connection made of it, and the clear error
of an endpoint that does not answer (before any JVM or query)."""

from __future__ import annotations

import doctest
import json
import time
from collections.abc import Callable

import pytest

from ackfold.airflow import connections as spark_tasks
from ackfold.cli import main as cli
from ackfold.config import ConfigError, Settings, connections, load_settings
from ackfold.ledger.commits import dml
from ackfold.spark import connect as spark
from ackfold.spark.conf import spark_conf
from ackfold.spark.connect import SparkConnectError, connect_address, connect_conf
from ackfold.spark.session import get_spark
from ackfold_dev.ports import free_port


def test_docstring_examples_run() -> None:
    for module in (connections, dml):
        assert doctest.testmod(module).failed == 0, module.__name__
    # Of these two modules, what needs no JVM (`get_spark`'s own example starts one).
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for function in (
        spark.connect_address,
        spark.connect_conf,
        spark_tasks.spark_connect_connection,
    ):
        module = spark if function.__module__ == spark.__name__ else spark_tasks
        for test in finder.find(function, globs=vars(module)):
            runner.run(test)
    assert runner.failures == 0
    assert runner.tries >= 4


def test_spark_remote_must_be_a_connect_url_and_the_error_hides_the_token() -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(spark={"remote": "http://spark.example.com/;token=s3cret"})
    assert "is not a Spark Connect URL" in str(error.value)
    assert "s3cret" not in str(error.value)


def test_ackfold_config_prints_the_remote_with_its_token_masked(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACKFOLD_SPARK__REMOTE", "sc://spark.example.com:443/;token=s3cret")
    assert cli.run(["config"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed)["spark"]["remote"] == "sc://spark.example.com:443/;token=***"
    assert "s3cret" not in printed


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("sc://10.0.0.5", ("10.0.0.5", 15002)),
        ("sc://spark.example.com:443/;use_ssl=true;token=x", ("spark.example.com", 443)),
        ("sc://[::1]:15003/", ("::1", 15003)),
    ],
)
def test_connect_address(url: str, address: tuple[str, int]) -> None:
    assert connect_address(url) == address


def test_a_connect_client_sets_only_runtime_session_settings(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(
        spark={"remote": "sc://127.0.0.1:15002", "conf": {"spark.sql.ansi.enabled": "true"}}
    )
    conf = connect_conf(settings)
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.databricks.delta.properties.defaults.enableDeletionVectors"] == "false"
    assert conf["spark.sql.ansi.enabled"] == "true"  # the user's own, passed on
    # Static settings too: a Connect client that sets one is refused by the server.
    server_side = (
        "spark.jars",
        "spark.sql.extensions",
        "spark.driver.memory",
        "spark.ui.enabled",
        "spark.sql.codegen.cache.maxEntries",
    )
    assert not set(server_side) & set(conf)
    assert spark_conf(settings)["spark.sql.codegen.cache.maxEntries"] == "2000"


def test_an_endpoint_that_does_not_answer_is_one_clear_error_at_once(
    make_settings: Callable[..., Settings],
) -> None:
    port = free_port()
    settings = make_settings(spark={"remote": f"sc://127.0.0.1:{port}/;token=s3cret"})
    started = time.monotonic()
    with pytest.raises(SparkConnectError) as error:
        get_spark(settings)
    assert time.monotonic() - started < 30, "not the client's minutes of retries"
    message = str(error.value)
    assert f"nothing answers at 127.0.0.1:{port}" in message
    assert "ACKFOLD_SPARK__REMOTE" in message
    assert "make connect" in message
    assert "s3cret" not in message


def test_the_spark_connect_connection_of_a_remote() -> None:
    found = spark_tasks.spark_connect_connection(
        "sc://h.example.com:8443/;user_id=ana;token=t;use_ssl=false"
    )
    assert found == {
        "conn_type": "spark_connect", "host": "h.example.com", "port": 8443,
        "login": "ana", "password": "t", "extra": {"use_ssl": False},
    }  # fmt: skip


def test_dml_literals_quote_what_they_render() -> None:
    assert dml.literal("o'brien\\") == "'o\\'brien\\\\'"
    assert dml.table("/w/a`b") == "delta.`/w/a``b`"
    assert dml.in_list("t.status", ["failed", "pending"]) == "t.status IN ('failed', 'pending')"
    with pytest.raises(ValueError, match="no values"):
        dml.in_list("t.status", [])
