"""Great Expectations, run the GX 1.x way: an ephemeral data context, a data source with
one dataframe asset per batch (Spark's on the Spark engine, pandas on the embedded one), a
suite and a validation definition per batch, and a Data Docs site built from the run's
results. On the embedded engine, the ledger suites are computed by DuckDB in one pass
over their tables (`ackfold.quality.duck_checks`) and `record`ed as GX results.

The context is ephemeral because ackfold generates every suite from its configuration:
there is no GX project to keep. The Data Docs of each run go to a fresh directory beside
`docs_dir` (`<docs_dir>.sites/<run id>`, `site_dir`), named after the run and each
validation after its suite; their pages link the styles and scripts GX would load from
CDNs to copies in the site (`docs_assets`), and `publish_site` points `docs_dir` (a
symbolic link) at it in one atomic step, so a reader never sees half a site; it keeps
the newest `quality.docs_keep` sites. The trend of every check is in `quality_results`.
"""

from __future__ import annotations

import logging
import numbers
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ackfold.ledger.schema.values import hex64
from ackfold.quality import docs_assets
from ackfold.quality.expectations import Suite
from ackfold.quality.report import CheckResult

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from pyspark.sql import DataFrame

SITE: Final = "ackfold"
SAMPLE: Final = 5
KEEP_SITES: Final = 3  # `quality.docs_keep`'s default

log = logging.getLogger(__name__)


class Validator:
    """Validates batches against suites; `publish()` builds and publishes Data Docs.
    `frames` is the kind of dataframes the batches are: `spark` or `pandas` (the engine
    that builds them says which: `ackfold.engines.Engine.quality_checks`)."""

    def __init__(
        self,
        docs_dir: Path,
        run_id: str,
        *,
        frames: str = "spark",
        keep: int = KEEP_SITES,
        assets_dir: Path | None = None,
    ) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        self.docs_dir = docs_dir
        self.site_dir = site_dir(docs_dir, run_id)
        self.keep = keep
        self.assets_dir = assets_dir
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        site: dict[str, Any] = {
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(self.site_dir),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            # No walkthrough modal or call-to-action footer: their scripts keep state in
            # the browser's storage, which the sandboxed pages may not touch (an uncaught
            # SecurityError on every page). SiteBuilder takes it; GX's typing omits it.
            "show_how_to_buttons": False,
        }
        self.context.add_data_docs_site(site_name=SITE, site_config=site)  # type: ignore[arg-type]
        # GX would persist every batch, and never unpersist it: `validate` caches the
        # batches that gain by it, and releases them.
        self.source: Any
        add = {"spark": self._add_spark, "pandas": self._add_pandas}.get(frames)
        if add is None:
            raise ValueError(f"frames {frames!r}: use 'spark' or 'pandas'")
        self.source = add()

    def _add_spark(self) -> Any:
        return self.context.data_sources.add_spark("ackfold", persist=False)

    def _add_pandas(self) -> Any:
        # Small frames: the delivery batches of the embedded engine.
        return self.context.data_sources.add_pandas("ackfold")

    def validate(self, suite: Suite, frame: DataFrame | pd.DataFrame) -> list[CheckResult]:
        import great_expectations as gx

        asset = self.source.add_dataframe_asset(suite.name)
        batch = asset.add_batch_definition_whole_dataframe(suite.name)
        expectations = self.context.suites.add(
            gx.ExpectationSuite(name=suite.name, expectations=suite.expectations)
        )
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=expectations)
        )
        spark = hasattr(frame, "unpersist")
        if suite.cached and spark:
            frame = frame.cache()  # each expectation is a Spark job over the batch
        try:
            run = self._run_id()
            outcome = definition.run(
                batch_parameters={"dataframe": frame},
                result_format={
                    "result_format": "SUMMARY",
                    "unexpected_index_column_names": list(suite.index),
                    "partial_unexpected_count": SAMPLE,
                },
                run_id=run,
            )
            self._name_the_asset(suite, outcome, run)
            return [self._result(suite, r, frame if spark else None) for r in outcome.results]
        finally:
            if spark:
                frame.unpersist()

    def _run_id(self) -> Any:
        """This run's id as GX records it: the quality run's id as its name (Data Docs
        list each validation under it; GX's default is `__none__`)."""
        from great_expectations.core.run_identifier import RunIdentifier

        return RunIdentifier(run_name=self.site_dir.name, run_time=datetime.now(UTC))

    def _name_the_asset(self, suite: Suite, outcome: Any, run: Any) -> None:
        """Store the validation of a dataframe batch again, with the asset's name where
        Data Docs look for it (its batch spec): a dataframe's spec names none, and the
        page said "Data asset: None"."""
        outcome.meta.setdefault("batch_spec", {})["data_asset_name"] = suite.name
        store = self.context.validation_results_store
        keys: list[Any] = store.list_keys()
        (key,) = [
            k for k in keys if k.expectation_suite_identifier.name == suite.name and k.run_id == run
        ]
        store.store_validation_results(outcome, key)

    def record(
        self, suite: Suite, results: Sequence[ExpectationValidationResult]
    ) -> list[CheckResult]:
        """Keep `results`, computed outside GX (`ackfold.quality.duck_checks`), as the
        validation of `suite`: Data Docs show them like the others."""
        import great_expectations as gx
        from great_expectations.core.expectation_validation_result import (
            ExpectationSuiteValidationResult,
        )
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )

        self.context.suites.add(
            gx.ExpectationSuite(name=suite.name, expectations=suite.expectations)
        )
        run = self._run_id()
        passed = sum(bool(r.success) for r in results)
        validation = ExpectationSuiteValidationResult(
            success=passed == len(results),
            results=list(results),
            suite_name=suite.name,
            statistics={
                "evaluated_expectations": len(results),
                "successful_expectations": passed,
                "unsuccessful_expectations": len(results) - passed,
                "success_percent": 100.0 * passed / len(results) if results else None,
            },
            meta={
                "run_id": run,
                "validation_time": run.run_time,
                # Where Data Docs find the asset's name (`_name_the_asset`).
                "batch_spec": {"data_asset_name": suite.name},
                # What GX's own runs record of the batch.
                "active_batch_definition": {
                    "datasource_name": "ackfold (DuckDB)",
                    "data_connector_name": "fluent",
                    "data_asset_name": suite.name,
                    "batch_identifiers": {},
                },
            },
        )
        key = ValidationResultIdentifier(
            expectation_suite_identifier=ExpectationSuiteIdentifier(name=suite.name),
            run_id=run,
            batch_identifier=suite.name,
        )
        self.context.validation_results_store.store_validation_results(validation, key)
        return [self._result(suite, r, None) for r in results]

    def _result(self, suite: Suite, result: Any, frame: DataFrame | None) -> CheckResult:
        config = result.expectation_config
        kwargs = dict(config.kwargs)
        raw: Mapping[str, Any] = result.result or {}
        error = (result.exception_info or {}).get("exception_message")
        sample: tuple[str, ...] = ()
        if error:
            observed = f"an error: {error}"
        elif config.type == "unexpected_rows_expectation":
            count = int(raw.get("observed_value") or 0)
            observed = f"{count} unexpected row(s)"
            if count and frame is not None:
                sample = self._unexpected_rows(kwargs["unexpected_rows_query"], frame)
            elif count:  # rows the embedded engine found
                rows = (raw.get("details") or {}).get("unexpected_rows") or []
                sample = tuple(_describe_row(row) for row in rows[:SAMPLE])
        elif "observed_value" in raw:
            observed = _observed(config.kwargs.get("column"), raw)
        else:
            observed = f"{raw.get('unexpected_count') or 0} of {raw.get('element_count', 0)} rows"
            sample = _index_sample(raw)
        threshold = {k: kwargs[k] for k in ("max_value", "value_set", "type_") if k in kwargs}
        return CheckResult(
            suite=suite.name,
            app=suite.app,
            check=config.meta["check"],
            expectation=config.type,
            description=config.description,
            success=bool(result.success) and not error,
            observed=observed,
            element_count=raw.get("element_count"),
            unexpected_count=raw.get("unexpected_count"),
            sample=sample,
            threshold=repr(threshold) if threshold else None,
        )

    def _unexpected_rows(self, query: str, frame: DataFrame) -> tuple[str, ...]:
        view = "ackfold_quality_batch"
        frame.createOrReplaceTempView(view)
        rows = frame.sparkSession.sql(query.replace("{batch}", view)).limit(SAMPLE).collect()
        return tuple(_describe_row(row.asDict()) for row in rows)

    def publish(self) -> Path:
        """Build Data Docs from this run's results and make them the ones `docs_dir`
        shows; returns the index page."""
        self.context.build_data_docs(site_names=[SITE])
        if self.assets_dir is not None:
            make_offline(self.site_dir, self.assets_dir)
        return publish_site(self.docs_dir, self.site_dir, keep=self.keep)


def site_dir(docs_dir: Path, run_id: str) -> Path:
    """Where the site of run `run_id` is built: beside `docs_dir`, never inside it."""
    return docs_dir.parent / f"{docs_dir.name}.sites" / run_id


def make_offline(site: Path, assets_dir: Path) -> int:
    """Link the pages of `site` to the styles and scripts GX loads from CDNs, copied once
    into the site's `_static/` folder (`docs_assets.linked_html`); the number of pages.
    Without the assets (`make setup` not run), the pages keep their CDN links, and the
    log says how to fix it."""
    try:
        assets = docs_assets.load(assets_dir)
    except docs_assets.AssetsError as exc:
        log.warning("Data Docs will need the internet for their styles: %s", exc)
        return 0
    pages = 0
    used: set[str] = set()
    for page in site.rglob("*.html"):
        depth = len(page.relative_to(site).parts) - 1
        html, linked = docs_assets.linked_html(page.read_text(encoding="utf-8"), assets, depth)
        page.write_text(html, encoding="utf-8")
        used |= linked
        pages += 1
    for path in sorted(used):
        target = site / docs_assets.STATIC / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(docs_assets.static_file(assets_dir, path))
    return pages


def publish_site(docs_dir: Path, site: Path, *, keep: int = KEEP_SITES) -> Path:
    """Point `docs_dir` (a symbolic link) at `site`, a directory of `site_dir`'s, in one
    atomic step, and delete all but the newest `keep` sites beside it; the index page.

    Example:
        >>> import tempfile
        >>> var = Path(tempfile.mkdtemp())
        >>> for run in ("r1", "r2", "r3"):
        ...     new = site_dir(var / "data_docs", run)
        ...     new.mkdir(parents=True)
        ...     _ = (new / "index.html").write_text(run)
        ...     index = publish_site(var / "data_docs", new, keep=2)
        >>> index.read_text(), sorted(p.name for p in new.parent.iterdir())
        ('r3', ['r2', 'r3'])
    """
    sites = site.parent
    if sites != site_dir(docs_dir, site.name).parent:
        raise ValueError(f"{site} is not a site of {docs_dir}: build it in {sites}")
    link = docs_dir.with_name(f".{docs_dir.name}.new")
    link.unlink(missing_ok=True)
    # Relative: the var directory may move.
    link.symlink_to(Path(sites.name) / site.name, True)
    if docs_dir.is_dir() and not docs_dir.is_symlink():
        shutil.rmtree(docs_dir)  # a plain directory left by an older layout
    os.replace(link, docs_dir)
    # Newest first by the time each site was built; the one just published stays.
    built = sorted(
        (p for p in sites.iterdir() if p.is_dir() and p != site),
        key=lambda p: p.stat().st_mtime_ns,
        reverse=True,
    )
    for old in built[keep - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
    return docs_dir / "index.html"


def _observed(column: str | None, raw: Mapping[str, Any]) -> str:
    value = raw["observed_value"]
    if column in ("duplicate_rate", "dead_letter_rate") and isinstance(value, float):
        return f"{value:.2%}"
    if column == "latency_p99_s" and isinstance(value, float):
        return f"{value:,.1f} s"
    missing = (raw.get("details") or {}).get("mismatched", {}).get("missing")
    if missing:
        return "missing columns " + ", ".join(missing)
    if isinstance(value, list):
        return f"{len(value)} columns"
    return str(value)


def _index_sample(raw: Mapping[str, Any]) -> tuple[str, ...]:
    rows = raw.get("partial_unexpected_index_list") or []
    if rows:
        # The index columns first, as Spark's results give them (pandas' put them last).
        index = list(raw.get("unexpected_index_column_names") or [])
        ordered = [{**{k: row[k] for k in index if k in row}, **row} for row in rows]
        return tuple(_describe_row(row) for row in ordered[:SAMPLE])
    return tuple(repr(v) for v in (raw.get("partial_unexpected_list") or [])[:SAMPLE])


def _describe_row(row: Mapping[str, Any]) -> str:
    """`root_id=0x…, attempt=6`: ids as the CLI and the UI show them."""
    parts = []
    for key, value in row.items():
        if key.endswith("root_id") and isinstance(value, numbers.Integral):
            value = hex64(int(value))  # an int, or numpy's from a pandas batch
        parts.append(f"{key}={value}")
    return ", ".join(parts)
