"""The one way ackfold builds an SQS client: endpoint, region, retries and timeouts from settings.

Credentials come only from boto3's standard chain (environment, profile, instance role...),
and so do the endpoint and the region unless `sqs.endpoint_url` and `sqs.region` set them
(the region also from `AWS_REGION`): unset, a client talks to AWS's regional endpoint.
A loopback endpoint (the local ElasticMQ) with no credentials anywhere is used unsigned:
ElasticMQ does not check signatures, and nobody should need fake keys to run the demo;
nor a region, which ElasticMQ ignores.

Example:
    >>> from ackfold.config import load_settings
    >>> sqs = sqs_client(load_settings(sqs={"region": "eu-west-1"}))
    >>> sqs.meta.endpoint_url
    'https://sqs.eu-west-1.amazonaws.com'
    >>> local = {"endpoint_url": "http://127.0.0.1:9324"}
    >>> sqs_client(load_settings(sqs=local)).meta.endpoint_url
    'http://127.0.0.1:9324'
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import botocore
import botocore.loaders
import botocore.session
from botocore.config import Config

from ackfold.config import Settings
from ackfold.config.hosts import is_loopback_host
from ackfold.sources.base import SourceError

CONNECT_TIMEOUT = 5.0
# A long poll holds the request open for `wait_time`: the read timeout must outlast it.
READ_MARGIN = 10.0
# The region a loopback endpoint's client takes when no setting nor AWS chain gives one.
LOCAL_REGION = "us-east-1"


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
    # botocore reads AWS_DEFAULT_REGION and the profile, but not AWS_REGION, which AWS's
    # other SDKs and MWAA set: read it here, after the setting and before botocore's chain.
    region = sqs.region or os.environ.get("AWS_REGION") or session.get_config_variable("region")
    local = is_loopback(sqs.endpoint_url)
    if not region:
        if not local:
            raise SourceError(
                "SQS has no region: set AWS_REGION (or AWS_DEFAULT_REGION, or a region in the "
                "AWS profile), or sqs.region (ACKFOLD_SQS__REGION)"
            )
        # ElasticMQ ignores the region; botocore only needs one to build the client.
        region = LOCAL_REGION
    config = Config(
        retries={"mode": "standard", "max_attempts": sqs.max_retries},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=sqs.wait_time.total_seconds() + READ_MARGIN,
    )
    if session.get_credentials() is None and local:
        config = config.merge(Config(signature_version=botocore.UNSIGNED))
    return session.create_client(
        "sqs", region_name=region, endpoint_url=sqs.endpoint_url, config=config
    )
