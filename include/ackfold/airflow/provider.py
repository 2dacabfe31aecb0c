"""What Airflow's providers manager shows of ackfold (`airflow providers list`, the UI's
*Providers* page, whose documentation link is the package's `Documentation` Project-URL):
the `apache_airflow_provider` entry point of the package. `airflow providers
notifications` lists its notifier, `airflow plugins` its plugin."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

PACKAGE = "ackfold"
PLUGIN = "ackfold_ui"


def get_provider_info() -> dict[str, Any]:
    """The provider's description, in the form of Airflow's `provider_info.schema.json`."""
    return {
        "package-name": PACKAGE,
        "name": "ackfold",
        "description": "Storm's guaranteed message processing for Spark streaming: an XOR "
        "ack ledger in Delta, folded, replayed and checked by Airflow DAGs.",
        "versions": [version(PACKAGE)],
        "notifications": ["ackfold.alerts.notifiers.WebhookNotifier"],
        # Also registered through the `airflow.plugins` entry point: Airflow keeps one
        # plugin per name.
        "plugins": [{"name": PLUGIN, "plugin-class": "ackfold.airflow.plugin.AckfoldUiPlugin"}],
    }
