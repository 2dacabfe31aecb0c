"""The local stack's endpoints, set by the stack itself: ackfold's defaults are
production's (no SQS endpoint, the region from the AWS chain), so `ackfold up`,
`ackfold demo` and `ackfold sqs` point SQS at the local ElasticMQ here, unless the
configuration names an endpoint (or unsets it: `ACKFOLD_SQS__ENDPOINT_URL=`).

Example:
    >>> from ackfold.config import load_settings
    >>> with_local_endpoints(load_settings(), environ={}).sqs.endpoint_url
    'http://127.0.0.1:9324'
    >>> aws = load_settings(sqs={"endpoint_url": ""})
    >>> with_local_endpoints(aws, environ={}).sqs.endpoint_url is None
    True
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Final

from ackfold.config import Settings

LOCAL_SQS: Final = "http://127.0.0.1:9324"
SQS_ENDPOINT_ENV: Final = "ACKFOLD_SQS__ENDPOINT_URL"


def with_local_endpoints(
    settings: Settings, environ: MutableMapping[str, str] | None = None
) -> Settings:
    """`settings` with the local ElasticMQ as SQS endpoint where no source sets one, and
    the same in `environ` (this process's environment by default), which the processes
    the stack starts inherit (Airflow's components, the demo, spark-submit)."""
    environ = os.environ if environ is None else environ
    if "endpoint_url" in settings.sqs.model_fields_set:
        return settings
    environ[SQS_ENDPOINT_ENV] = LOCAL_SQS
    sqs = settings.sqs.model_copy(update={"endpoint_url": LOCAL_SQS})
    return settings.model_copy(update={"sqs": sqs})
