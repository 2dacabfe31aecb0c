"""SQS as a source queue, through boto3: receive, delete, republish, dead-letter.

Works against AWS and any SQS-compatible server (ElasticMQ locally) alike: the endpoint,
region and retries come from `settings.sqs`, credentials from boto3's standard chain.

Example:
    >>> from ackfold.sources.sqs import SqsQueue
    >>> queue = SqsQueue(settings, "wordcount-sentences")        # doctest: +SKIP
    >>> [m.message_id for m in queue.receive(10, wait_seconds=1)]  # doctest: +SKIP
    ['5fea7756-0ea4-451a-a703-a558b933e274']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ackfold.config import Settings
from ackfold.sources.base import (
    ATTEMPT,
    ORIGIN_ROOT_ID,
    Outbound,
    PullSource,
    Received,
    Sent,
    SourceError,
)

log = logging.getLogger("ackfold.sources.sqs")

BATCH = 10  # SQS's limit for ReceiveMessage, SendMessageBatch and DeleteMessageBatch
# SQS caps a string attribute's value at 256 KiB; reasons are kept short and readable.
_MAX_REASON = 1000
_RETRYABLE_ERRORS = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError")
_MISSING = "does not exist"
# How much of a server's reply an error quotes: something that is not SQS (a web server
# on the endpoint's port) may answer with a whole page.
_QUOTED_CHARS = 200
# The IAM permission each call needs (a batch call needs its single action's permission).
_PERMISSIONS = {
    "GetQueueUrl": "sqs:GetQueueUrl",
    "ReceiveMessage": "sqs:ReceiveMessage",
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "SendMessageBatch": "sqs:SendMessage",
    "GetQueueAttributes": "sqs:GetQueueAttributes",
}


class SqsQueue(PullSource):
    """One SQS queue, by name. Its dead-letter queue is `dead_letter_queue`, by default
    `<queue>-dlq` (`<name>-dlq.fifo` for `<name>.fifo`). ackfold moves dead letters itself;
    a RedrivePolicy on the queue is only a safety net."""

    source = "sqs"
    # A replay has a few SendMessageBatch calls (of `BATCH` each) under way at once: one
    # at a time, the round trips, not the server, set the pace.
    parallel: ClassVar[int] = 8

    def __init__(
        self,
        settings: Settings,
        queue: str,
        *,
        dead_letter_queue: str | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(queue)
        self._settings = settings
        self._client = client
        self._client_lock = threading.Lock()  # a replay's send threads may ask first
        self.visibility_timeout = int(settings.sqs.visibility_timeout.total_seconds())
        self._dead_letter_queue = dead_letter_queue
        self._urls: dict[str, str] = {}

    @property
    def client(self) -> Any:
        """The boto3 client, made at the first call: planning a replay (a dry run too)
        needs the queue's names only, not SQS's region or credentials."""
        with self._client_lock:
            if self._client is None:
                from ackfold.sources.sqs_client import sqs_client

                self._client = sqs_client(self._settings)
            return self._client

    @property
    def endpoint(self) -> str:
        """Where this queue's SQS is, for messages: the endpoint, or AWS's in its region."""
        if self._settings.sqs.endpoint_url:
            return self._settings.sqs.endpoint_url
        region = getattr(getattr(self.client, "meta", None), "region_name", None)
        return f"AWS SQS in {region or self._settings.sqs.region}"

    # -- reading --------------------------------------------------------------------------

    def receive(self, max_messages: int, wait_seconds: int) -> list[Received]:
        response = self._call(
            "ReceiveMessage",
            self.client.receive_message,
            QueueUrl=self.url(self.queue),
            MaxNumberOfMessages=max(1, min(BATCH, max_messages)),
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=self.visibility_timeout,
            MessageAttributeNames=[ORIGIN_ROOT_ID, ATTEMPT],
        )
        return [_received(message) for message in response.get("Messages", [])]

    def acknowledge(self, messages: Sequence[Received]) -> int:
        refused = 0
        for chunk in _chunks(messages):
            entries = [{"Id": str(i), "ReceiptHandle": m.handle} for i, m in enumerate(chunk)]
            response = self._call(
                "DeleteMessageBatch",
                self.client.delete_message_batch,
                QueueUrl=self.url(self.queue),
                Entries=entries,
            )
            for failure in response.get("Failed", []):
                refused += 1
                log.warning(
                    "SQS kept message %s of %s (%s): it will be delivered and registered again",
                    chunk[int(failure["Id"])].message_id, self.queue, failure.get("Code"),
                )  # fmt: skip
        return refused

    # -- sending --------------------------------------------------------------------------

    def republish(self, messages: Sequence[Outbound]) -> list[Sent]:
        return self._send(self.queue, messages)

    def dead_letter(self, messages: Sequence[Outbound]) -> list[Sent]:
        return self._send(self.dead_letter_queue, messages)

    @property
    def dead_letter_queue(self) -> str:
        if self._dead_letter_queue:
            return self._dead_letter_queue
        # A FIFO queue's dead-letter queue must be FIFO too: its name ends in .fifo.
        base, fifo = self.queue.removesuffix(".fifo"), self.queue.endswith(".fifo")
        return f"{base}-dlq" + (".fifo" if fifo else "")

    def check_dead_letter_queue(self, app: str) -> None:
        """The dead-letter queue must exist: ackfold creates no queue outside the local
        stack (a queue's retention, encryption and policies are the deployment's)."""
        dead = self.dead_letter_queue
        try:
            self.url(dead)
        except SourceError as exc:
            if _MISSING not in str(exc):
                raise
            variable = f"ACKFOLD_APPS__{app.upper()}__DEAD_LETTER_QUEUE"
            raise SourceError(
                f"SQS dead-letter queue {dead} (of {self.queue}) does not exist at "
                f"{self.endpoint}: the roots of app {app} that run out of attempts go there, "
                f"and ackfold creates no queue. Create it (aws sqs create-queue --queue-name "
                f"{dead}), or name an existing one in apps.{app}.dead_letter_queue "
                f"({variable}); the role needs sqs:GetQueueUrl and sqs:SendMessage on it. "
                "Nothing was sent"
            ) from None

    def _send(self, queue: str, messages: Sequence[Outbound]) -> list[Sent]:
        try:
            url = self.url(queue)
        except SourceError as exc:
            return [Sent(m.root_id, error=str(exc)) for m in messages]
        fifo = queue.endswith(".fifo")
        results: list[Sent] = []
        for chunk in _chunks(messages):
            entries = [_entry(str(i), message, fifo) for i, message in enumerate(chunk)]
            try:
                response = self._call(
                    "SendMessageBatch",
                    self.client.send_message_batch,
                    QueueUrl=url,
                    Entries=entries,
                )
            except SourceError as exc:
                results.extend(Sent(m.root_id, error=str(exc)) for m in chunk)
                continue
            sent = {e["Id"]: e["MessageId"] for e in response.get("Successful", [])}
            failed = {e["Id"]: e for e in response.get("Failed", [])}
            for i, message in enumerate(chunk):
                if str(i) in sent:
                    results.append(Sent(message.root_id, message_id=sent[str(i)]))
                else:
                    failure = failed.get(str(i), {})
                    results.append(
                        Sent(
                            message.root_id,
                            error=f"{queue}: {failure.get('Code', 'not sent')}: "
                            f"{_one_line(failure.get('Message', ''))}".rstrip(": "),
                        )
                    )
        return results

    # -- plumbing -------------------------------------------------------------------------

    def url(self, queue: str) -> str:
        """The queue's URL, looked up once; `SourceError` if it does not exist."""
        if queue not in self._urls:
            response = self._call("GetQueueUrl", self.client.get_queue_url, QueueName=queue)
            self._urls[queue] = str(response["QueueUrl"])
        return self._urls[queue]

    def _call(self, action: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        """Call SQS (botocore retries with backoff first); failures become `SourceError`."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return method(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            queue = kwargs.get("QueueName") or kwargs.get("QueueUrl")
            if "NonExistentQueue" in code or code == "QueueDoesNotExist":
                raise SourceError(f"SQS queue {queue} {_MISSING} at {self.endpoint}") from None
            message = _one_line(exc.response.get("Error", {}).get("Message", ""))
            if "AccessDenied" in code:
                permission = _PERMISSIONS.get(action, f"sqs:{action}")
                raise SourceError(
                    f"SQS refused {action} on {queue} at {self.endpoint} ({code}: {message}): "
                    f"the role of this host needs {permission} on that queue "
                    "(docs/operations/deploy.md lists what each command needs)"
                ) from None
            raise SourceError(
                f"SQS {action} failed at {self.endpoint}: {code}: {message}"
            ) from None
        except BotoCoreError as exc:
            if type(exc).__name__ in _RETRYABLE_ERRORS:
                raise SourceError(
                    f"SQS is unreachable at {self.endpoint} ({action}): {_one_line(exc)}"
                ) from None
            raise SourceError(f"SQS {action} failed at {self.endpoint}: {_one_line(exc)}") from None


def _one_line(text: object) -> str:
    """A server's words as one line of an error, cut short: errors are printed and logged
    one line each, and a reply may be a multi-line page."""
    words = " ".join(str(text).split())
    return words if len(words) <= _QUOTED_CHARS else words[: _QUOTED_CHARS - 1] + "…"


def _received(message: dict[str, Any]) -> Received:
    attributes = message.get("MessageAttributes", {})

    def value(name: str) -> str | None:
        entry = attributes.get(name)
        return None if entry is None else entry.get("StringValue")

    attempt_text, origin_text = value(ATTEMPT), value(ORIGIN_ROOT_ID)
    base = Received(message["MessageId"], message.get("Body", ""), message["ReceiptHandle"])
    if attempt_text is None and origin_text is None:
        return base
    try:
        attempt = int(attempt_text or "")
        origin = int(origin_text or "")
        if attempt < 2 or not -(1 << 63) <= origin < (1 << 63):
            raise ValueError
    except ValueError:
        # A message cannot lose its place: it is taken as a new message (attempt 1).
        problem = f"ignored attributes attempt={attempt_text!r} origin_root_id={origin_text!r}"
        return Received(base.message_id, base.body, base.handle, problem=problem)
    return Received(base.message_id, base.body, base.handle, attempt, origin)


def _entry(entry_id: str, message: Outbound, fifo: bool) -> dict[str, Any]:
    attributes = {
        ORIGIN_ROOT_ID: {"DataType": "Number", "StringValue": str(message.origin_root_id)},
        ATTEMPT: {"DataType": "Number", "StringValue": str(message.attempt)},
    }
    for name, text in message.attributes.items():
        attributes[name] = {"DataType": "String", "StringValue": text[:_MAX_REASON] or "-"}
    entry: dict[str, Any] = {
        "Id": entry_id,
        "MessageBody": message.body or "",
        "MessageAttributes": attributes,
    }
    if fifo:
        entry["MessageDeduplicationId"] = message.dedup_id
        entry["MessageGroupId"] = str(message.origin_root_id)
    return entry


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
