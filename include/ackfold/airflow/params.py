"""The forms of the manual replay and the manual retract (`ackfold_manual_replay`'s and
`ackfold_manual_retract`'s params), who asked for a run, and the `validate` tasks that
check a run's conf before anything is read, sent or deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ackfold.airflow.compat import fail_exception
from ackfold.config import Settings, load_settings

if TYPE_CHECKING:
    from airflow.sdk import Param


def manual_replay_params(settings: Settings | None = None) -> dict[str, Param]:
    """The form of `ackfold_manual_replay`: one Param per `ackfold.replay.params.CONF_KEYS`, with
    the defaults `parse_replay_conf` applies to a missing key."""
    from airflow.sdk import Param

    from ackfold.config.values import MAX_RATE, MIN_RATE
    from ackfold.ledger.reading.parse import EARLIEST, LATEST, MAX_LIMIT
    from ackfold.replay.params import MAX_ROOT_IDS
    from ackfold.replay.request import DEFAULT_STATUSES, REPLAYABLE

    settings = settings or load_settings()
    which, how = "Which roots", "How to send"
    return {
        "root_ids": Param(
            [],
            type="array",
            items={"type": "string", "pattern": r"^\s*([+-]?[0-9]+|(0[xX])?[0-9a-fA-F]{1,16})\s*$"},
            maxItems=MAX_ROOT_IDS,
            title="Root ids",
            description="One per line, as `ackfold roots` lists it (0x and 16 hex digits), "
            "or in decimal. Empty: every root the filters below select.",
            section=which,
        ),
        "app": Param(
            None,
            type=["null", "string"],
            enum=[None, *sorted(settings.apps)],
            title="App",
            description="Only roots of this app (empty: any app).",
            section=which,
        ),
        "statuses": Param(
            list(DEFAULT_STATUSES),
            type="array",
            items={"type": "string", "enum": list(REPLAYABLE)},
            minItems=1,
            uniqueItems=True,
            title="Statuses",
            description="Roots in these statuses. `dead_lettered` brings dead letters back.",
            section=which,
        ),
        "since": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Status changed since",
            description=f"ISO-8601, e.g. 2026-11-22T10:00:00Z, from {EARLIEST.year} up to "
            f"{LATEST.year} (empty: no lower bound).",
            section=which,
        ),
        "until": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Status changed before",
            description=f"ISO-8601, from {EARLIEST.year} up to {LATEST.year} (empty: no upper "
            "bound).",
            section=which,
        ),
        "limit": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            maximum=MAX_LIMIT,
            title="Limit",
            description=f"At most this many roots (1 to {MAX_LIMIT:,}), oldest status change "
            "first. Required to send when no root id, app or time range narrows the request.",
            section=which,
        ),
        "rate": Param(
            None,
            type=["null", "number"],
            minimum=MIN_RATE,
            maximum=MAX_RATE,
            title="Rate (messages/s)",
            description=f"From {MIN_RATE:g} to {MAX_RATE:,.0f}. Empty: the app's `replay_rate`.",
            section=how,
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description="Plan and log what would be sent, send nothing. Untick to send.",
            section=how,
        ),
    }


def manual_retract_params(settings: Settings | None = None) -> dict[str, Param]:
    """The form of `ackfold_manual_retract`: the manual replay's selection (root ids, app,
    time range, limit) and its dry run, among dead-lettered roots only (no statuses, no
    rate): one Param per `ackfold.effects.params.RETRACT_CONF_KEYS`."""
    from airflow.sdk import Param

    from ackfold.effects.params import RETRACT_CONF_KEYS
    from ackfold.ledger.reading.parse import MAX_LIMIT

    replay = manual_replay_params(settings)
    form = {key: replay[key] for key in RETRACT_CONF_KEYS}

    def described(key: str, description: str) -> Param:
        return Param(form[key].value, description=description, **form[key].schema)

    form["root_ids"] = described(
        "root_ids",
        "Dead-lettered roots, one per line, as `ackfold roots` lists them (0x and 16 hex "
        "digits), or in decimal. Empty: every dead letter the filters below select.",
    )
    form["limit"] = described(
        "limit",
        f"At most this many roots (1 to {MAX_LIMIT:,}), oldest status change first. "
        "Required to delete when no root id, app or time range narrows the request.",
    )
    form["dry_run"] = Param(
        True,
        type="boolean",
        title="Dry run",
        description="Find and log what would be deleted, delete nothing. Untick to delete.",
        section="How",
    )
    return form


def requester(dag_run: Any) -> str:
    """`requested_by` of a manual replay or retract: the Airflow user who triggered the
    run."""
    user = getattr(dag_run, "triggering_user_name", None)
    return f"airflow:{user}" if user else "airflow"


def validate_manual_conf(
    conf: dict[str, Any] | None, settings: Settings | None = None
) -> dict[str, Any]:
    """The `validate` task: the run's conf, checked and normalized (what the replay task
    runs). A bad conf fails the task at once, without retries: it will not get better."""
    from ackfold.replay.params import ReplayParamsError, conf_from_request, parse_replay_conf

    settings = settings or load_settings()
    try:
        request = parse_replay_conf(conf or {}, apps=list(settings.apps))
    except ReplayParamsError as exc:
        raise fail_exception()(str(exc)) from None
    return conf_from_request(request)


def validate_retract_conf(
    conf: dict[str, Any] | None, settings: Settings | None = None
) -> dict[str, Any]:
    """The `validate` task of `ackfold_manual_retract`: the run's conf, checked and
    normalized (what the retract task runs). A bad conf fails the task at once, without
    retries."""
    from ackfold.effects.errors import RetractParamsError
    from ackfold.effects.params import conf_from_retract, parse_retract_conf

    settings = settings or load_settings()
    try:
        request = parse_retract_conf(conf or {}, apps=list(settings.apps))
    except RetractParamsError as exc:
        raise fail_exception()(str(exc)) from None
    return conf_from_retract(request)
