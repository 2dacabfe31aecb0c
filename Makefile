# ackfold's vocabulary. `make run` and `make test` install whatever is missing first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
INSTALLED := $(VENV)/.installed
# The repository's state (the jar cache, make run's warehouse and Airflow, test servers):
# its own var/. Outside it, ackfold keeps state under the Airflow home or the user's
# state directory, never the working directory.
export ACKFOLD_VAR_DIR ?= $(CURDIR)/var
# Spark's Python packages are source-only on PyPI, and uv rebuilds a source archive
# whenever the index's caching headers are missing (behind some proxies: each time).
# scripts/wheelhouse.py builds each version once into var/wheels, which uv reads first.
export UV_FIND_LINKS ?= $(CURDIR)/var/wheels
# make test's xdist workers: the groups of tests that share a server or a JVM
# (tests/conftest.py GROUPS), each on one worker, mostly waiting on their servers.
TEST_WORKERS ?= 4

.PHONY: run test lint format setup install wheels jars emulators schemas docs-assets browser test-unit test-spark connect \
        test-airflow test-sqs test-kafka test-e2e test-browser test-cluster test-connect test-pythons test-bench test-docs test-install test-s3 test-stores docs sqs s3 gcs azure kafka cluster demo bench bench-reconcile bench-replay bench-demo-stores \
        bench-wordcount bench-ui bench-quality bench-kafka bench-connect soak lock clean

## run: install what is missing, then start the embedded stack (Ctrl-C stops it)
run: setup
	$(BIN)/ackfold up

## demo: the word-count demo on a local SQS (or Kafka: apps.wordcount.source), with seeded faults, and its delivery report
demo: setup
	$(BIN)/ackfold demo

## sqs: the local SQS server (ElasticMQ) with the demo queues on 127.0.0.1:9324 (Ctrl-C stops it)
sqs: setup
	$(BIN)/ackfold sqs

## s3: the local S3 API (moto, atomic conditional writes) with the bucket `ackfold` on 127.0.0.1:9020 (Ctrl-C stops it)
s3: setup
	$(BIN)/ackfold s3

## gcs: the local GCS API (fake-gcs-server behind ackfold's proxy) with the bucket `ackfold` on 127.0.0.1:9030 (Ctrl-C stops it)
gcs: setup emulators
	$(BIN)/ackfold gcs

## azure: the local Azure Blob API (Azurite behind ackfold's proxy) with the container `ackfold` on 127.0.0.1:9040 (Ctrl-C stops it)
azure: setup emulators
	$(BIN)/ackfold azure

## kafka: the local Kafka broker (KRaft) with the demo topics on 127.0.0.1:9092 (Ctrl-C stops it)
kafka: setup
	$(BIN)/ackfold kafka

## cluster: a Spark standalone cluster (a master, 2 workers) on 127.0.0.1:7077 (Ctrl-C stops it)
cluster: setup
	$(BIN)/ackfold cluster

## connect: a Spark Connect server with Delta on sc://127.0.0.1:15002 (Ctrl-C stops it)
connect: setup
	$(BIN)/ackfold connect

## test: install what is missing, lint, then run every test tier, side by side (TEST_WORKERS)
test: setup wheels emulators schemas browser lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup

## setup: Python packages in .venv, JVM jars in var/jars, Data Docs' styles and scripts (all idempotent; the store emulators are `make emulators`, which `make test` runs)
setup: install jars docs-assets

install: $(INSTALLED)

# ackfold, and beside it its development wing (dev/: the local servers, `ackfold up` and
# `ackfold demo`), both editable. The wheel of ackfold holds none of the wing.
$(INSTALLED): requirements.txt requirements-dev.txt pyproject.toml dev/pyproject.toml
	@scripts/system-deps.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q "uv==$(UV_VERSION)"
	@$(BIN)/python scripts/wheelhouse.py $(UV_FIND_LINKS)
	$(BIN)/uv pip install -q --python $(BIN)/python -r requirements.txt -r requirements-dev.txt
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e . -e dev
	@touch $@

# The tests' too: the Spark of each Airflow release's pins, and the newest each range
# allows (the install tier resolves them; a newer one may be out since the last run).
wheels: install
	@$(BIN)/python scripts/wheelhouse.py $(UV_FIND_LINKS) --tests

# The Compose Specification's JSON schema that tests/deploy validates docker-compose.yml
# against: from npm, pinned by version and sha256 (dev/ackfold_dev/compose_schema.py).
schemas: install
	@scripts/system-deps.sh --npm
	@$(BIN)/python -m ackfold_dev.compose_schema var/schemas

# The styles and scripts GX's Data Docs load from CDNs: from npm, pinned by version and
# sha256, into quality.assets_dir (var/quality/assets); each published page carries them.
docs-assets: install
	@scripts/system-deps.sh --npm
	@$(BIN)/python -m ackfold.quality.docs_assets

# Debian's Chromium, for the browser tier (tests/browser).
browser:
	@scripts/system-deps.sh --browser

# Idempotent and quick once the cache verifies: it checks every jar's checksum. The tests'
# connectors (S3A, GCS, ABFS: tests/stores runs Spark on each store) too; `ackfold setup`
# alone resolves only the configured warehouse's.
jars: install
	@$(BIN)/ackfold setup
	@$(BIN)/ackfold setup --bundle s3a --bundle gcs --bundle azure

# The local stores' emulators: Azurite from npm (a pinned lock, integrity-checked),
# fake-gcs-server and versitygw (the soak's S3 API) built from the Go module proxy (pinned
# versions, checksum-verified; Go 1.25 or newer).
emulators: install
	@scripts/system-deps.sh --emulators
	@$(BIN)/python -m ackfold_dev.emulators var/emulators

## lint: ruff (lint and format check) over the repo, mypy --strict on the library
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## test-unit: the fast tier (plain Python, no JVM, no Airflow): seconds
test-unit: install schemas
	$(BIN)/pytest tests/unit tests/ui tests/deploy

test-spark: setup
	$(BIN)/pytest -m spark

test-airflow: setup
	$(BIN)/pytest -m airflow

test-sqs: setup
	$(BIN)/pytest -m sqs

## test-kafka: Kafka as a source queue, against a real broker on loopback
test-kafka: setup
	$(BIN)/pytest -m kafka

test-e2e: setup
	$(BIN)/pytest -m e2e

test-browser: setup browser
	$(BIN)/pytest -m browser

## test-cluster: reconcile and the word count on a local Spark standalone cluster
test-cluster: setup
	$(BIN)/pytest -m cluster

## test-connect: tracking, the demo, reconcile, replay and quality through a local Spark Connect server
test-connect: setup
	$(BIN)/pytest -m connect

## test-pythons: the fast tier and the Spark tracking tests on Python 3.13, every module imported on 3.12 (virtualenvs in var/venvs)
test-pythons: setup schemas
	$(BIN)/pytest -m pythons

## test-bench: every bench/ script at a tiny size (a benchmark that breaks fails the suite)
## test-s3: the ledger on a local S3 API (moto): commits, refusals, the no-commit-lost run
test-s3: setup
	$(BIN)/pytest -m s3

## test-stores: the ledger on GCS and ADLS (fake-gcs-server, Azurite), and Spark on S3, GCS and ADLS
test-stores: setup emulators
	$(BIN)/pytest -m stores

test-bench: setup
	$(BIN)/pytest -m bench

## test-docs: every code block of the README and docs/ (the stack's run against `make run`), and the strict site build
test-docs: setup browser
	$(BIN)/pytest -m docs

## test-install: the wheel in a fresh virtualenv, in each supported Airflow minor, and on both ends of its dependencies
test-install: setup
	$(BIN)/pytest -m install

## docs: build the docs site into site/ (strict: a broken link, anchor or API reference fails it)
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## bench: every benchmark, about an hour (figures go to docs/benchmarks.md)
bench: bench-reconcile bench-replay bench-wordcount bench-ui bench-quality bench-kafka bench-connect

## bench-reconcile: ackfold reconcile (embedded, and Spark at 10M) against DuckDB's bare fold, whole commands, at 10M and 50M events; 1M new over 0, 10M, 50M; the plot
bench-reconcile: setup
	$(BIN)/python bench/reconcile.py

## bench-replay: replay throughput to a real ElasticMQ (about a minute)
bench-replay: setup
	$(BIN)/python bench/replay.py

## bench-demo-stores: `ackfold demo` with faults on the local disk, S3 and GCS, side by side (about 20 minutes)
bench-demo-stores: setup emulators
	$(BIN)/python bench/demo_store.py

## bench-kafka: Kafka ingest and replay throughput against a real local broker (a few minutes)
bench-kafka: setup
	$(BIN)/python bench/kafka.py

## bench-connect: ackfold reconcile through a local Spark Connect server against a classic session (1M events; nothing new)
bench-connect: setup
	$(BIN)/python bench/connect.py

## bench-wordcount: the demo app with and without tracking: the tracking overhead
bench-wordcount: setup
	$(BIN)/python bench/wordcount.py

## bench-ui: the Reliability UI's and the CLI's read latencies on a 10-million-root ledger (no JVM)
bench-ui: setup
	$(BIN)/python bench/ui.py

## bench-quality: the quality checks on the embedded engine and on Spark, side by side: 10M events, and 1M over them
bench-quality: setup
	$(BIN)/python bench/quality.py

## soak: a simulated year of a production ledger, with faults, checked against the reference fold: three seeds on local disk, one on the local S3 API (versitygw, from `make emulators`; `--s3-server moto` for moto) (hours; figures go to docs/benchmarks.md)
soak: setup emulators
	$(BIN)/python bench/soak.py --seeds 1 2 3
	$(BIN)/python bench/soak.py --seeds 4 --store s3

## lock: re-resolve requirements*.in into the pinned requirements*.txt
lock: install
	$(BIN)/uv pip compile -q --python-version 3.11 --no-header requirements.in -o requirements.txt
	$(BIN)/uv pip compile -q --python-version 3.11 --no-header requirements-dev.in -o requirements-dev.txt

clean:
	rm -rf var/warehouse var/airflow
