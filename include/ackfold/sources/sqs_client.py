"""The one way ackfold builds an SQS client: endpoint, region, retries and timeouts from settings.

Credentials come only from boto3's standard chain (environment, profile, instance role...).
A loopback endpoint (the local ElasticMQ) with no credentials anywhere is used unsigned:
ElasticMQ does not check signatures, and nobody should need fake keys to run the demo.

Example:
    >>> from ackfold.config import load_settings
    >>> sqs = sqs_client(load_settings())
    >>> sqs.meta.endpoint_url
    'http://127.0.0.1:9324'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import botocore
import botocore.loaders
import botocore.session
from botocore.config import Config

from ackfold.config import Settings
from ackfold.config.hosts import is_loopback_host

CONNECT_TIMEOUT = 5.0
# A long poll holds the request open for `wait_time`: the read timeout must outlast it.
READ_MARGIN = 10.0


def is_loopback(url: str | None) -> bool:
    """True for an endpoint on this machine: 127.0.0.0/8, ::1 or localhost."""
    host = urlsplit(url).hostname if url else None
    return host is not None and is_loopback_host(host)


# botocore reads a service's model (large JSON files) once per loader, and each new session
# makes its own: one loader for the process, so a client is made without reading them again
# (a replay makes one per queue; the soak, thousands). Sessions, and so credentials, stay
# one per client.
_LOADER = botocore.loaders.create_loader()


def sqs_client(settings: Settings) -> Any:
    """A boto3 (botocore) SQS client for `settings.sqs`, unsigned only for a loopback endpoint
    without credentials."""
    sqs = settings.sqs
    session = botocore.session.Session()
    session.register_component("data_loader", _LOADER)
    config = Config(
        retries={"mode": "standard", "max_attempts": sqs.max_retries},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=sqs.wait_time.total_seconds() + READ_MARGIN,
    )
    if session.get_credentials() is None and is_loopback(sqs.endpoint_url):
        config = config.merge(Config(signature_version=botocore.UNSIGNED))
    return session.create_client(
        "sqs", region_name=sqs.region, endpoint_url=sqs.endpoint_url, config=config
    )
