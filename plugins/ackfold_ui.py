"""ackfold's Reliability UI for an Airflow that loads plugins from its plugins folder
(MWAA's `plugins.zip`, Composer's `plugins/` folder, an image that copies this folder).

The plugin itself is in the package (`ackfold.airflow.plugin`), which must be installed
in the same environment. ackfold's wheel also registers it through its `airflow.plugins`
entry point: Airflow keeps one plugin per name, so with both it registers once.
"""

from ackfold.airflow.plugin import AckfoldUiPlugin

__all__ = ["AckfoldUiPlugin"]
