"""The suite's xdist groups (`tests/conftest.py`): the tests that run their work in
processes of their own are spread over the workers, one group each; those that share a
worker's JVM, servers or build directory stay together."""

from __future__ import annotations

from tests.conftest import group_of, grouped

BENCH = "tests/bench/test_scripts.py::test_the_script_runs_at_a_tiny_size"
PYTHONS = "tests/pythons/test_other_pythons.py::test_the_"
ENDS = "tests/install/test_dependency_ends.py::test_the_embedded_engine_and_the_ledger_pass"


def test_each_bench_script_and_each_run_on_another_python_is_a_group_of_its_own() -> None:
    scripts = {group_of("bench", f"{BENCH}[{name}]") for name in ("quality.py", "connect.py")}
    pythons = {
        group_of("pythons", f"{PYTHONS}{name}_pass_on_the_newest")
        for name in ("fast_tier", "spark_tracking_tests")
    }
    assert len(scripts) == 2
    assert len(pythons) == 2
    assert all(group.startswith("bench:") for group in scripts)


def test_the_dependency_ends_share_a_group_apart_from_the_wheels_tests() -> None:
    ends = {group_of("install", f"{ENDS}[{end}]") for end in ("lowest", "newest")}
    wheel = group_of("install", "tests/install/test_wheel.py::test_every_ackfold_dag_loads")
    assert ends == {"install-ends"}
    assert wheel == "install"


def test_the_jvm_tiers_keep_their_shared_groups() -> None:
    assert group_of("spark", "tests/spark/test_tracking.py::test_x") == "spark"
    # Three groups, not one: each worker's session serves every group it runs, and as one
    # group they were the longest of the run by far.
    assert group_of("kafka", "tests/kafka/test_k.py::test_x") == "kafka"
    on_spark = group_of("conformance", "tests/conformance/t.py::test_x", engine="spark")
    assert on_spark == "conformance-spark"
    assert group_of("conformance", "tests/conformance/t.py::test_x", engine="embedded") == (
        "tests/conformance/t.py"
    )
    assert group_of("bench", f"{BENCH}[ui.py]", on_stack=True) == "stack"
    assert group_of("unit", "tests/unit/test_ids.py::test_x") == "tests/unit/test_ids.py"


def test_a_spread_groups_name_leaves_the_test_id_readable_as_grouped() -> None:
    # xdist writes `<id>@<group>`; a bracket in the group would hide the `@` from the check
    # that xdist kept the groups, and stop the suite at its start.
    nodeid = "tests/pythons/test_other_pythons.py::test_every_module_imports[3.12]"
    group = group_of("pythons", nodeid)
    assert "[" not in group
    assert "]" not in group
    assert grouped(f"{nodeid}@{group}")
    assert not grouped(nodeid)
