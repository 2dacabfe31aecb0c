"""Effects: what a root's message left in its app's outputs, and taking a dead letter's
back (issue 58).

- `outputs`: declared outputs, where each app's effects live (`DeclaredOutput`,
  `declare_output`, `declared_outputs`; the `declared_outputs` ledger table);
- `find`: a root's rows per output, by its origin root id (`find_effects`,
  `root_effects`, `dead_letter_effects`);
- `plans`: a retract's request, plan and summary;
- `retract`: `run_retract()`, one retract run (select dead letters, refuse what is not
  theirs to take, log ahead, one delete commit per output, fenced by the lease), and
  `plan_retract()`, its dry run; `params`: the same as a run conf (the DAG, the UI);
- `audit`: the `retract_log`, read back (`retract_history`);
- `errors`: every error of the package.

Example:
    >>> from ackfold.effects import RetractRequest, run_retract
    >>> plan = run_retract(settings, RetractRequest(root_ids=(42,)))  # doctest: +SKIP
    >>> plan.as_dict()["to_delete"]                                  # doctest: +SKIP
    {'/warehouse/words': 7}
"""

from ackfold.effects.audit import RetractRecord, retract_history
from ackfold.effects.errors import (
    EffectsError,
    OutputDeclarationError,
    OutputUnreadable,
    RetractParamsError,
    RetractRefused,
    UnknownRoots,
)
from ackfold.effects.find import (
    OutputEffects,
    RootEffects,
    dead_letter_effects,
    find_effects,
    root_effects,
)
from ackfold.effects.outputs import (
    ORIGIN_COLUMN,
    DeclaredOutput,
    declare_output,
    declared_outputs,
)
from ackfold.effects.params import MANUAL_RETRACT_DAG_ID, conf_from_retract, parse_retract_conf
from ackfold.effects.plans import RetractPlan, RetractRequest, RetractSummary
from ackfold.effects.retract import plan_retract, run_retract
from ackfold.effects.roots import RootRef

__all__ = [
    "MANUAL_RETRACT_DAG_ID",
    "ORIGIN_COLUMN",
    "DeclaredOutput",
    "EffectsError",
    "OutputDeclarationError",
    "OutputEffects",
    "OutputUnreadable",
    "RetractParamsError",
    "RetractPlan",
    "RetractRecord",
    "RetractRefused",
    "RetractRequest",
    "RetractSummary",
    "RootEffects",
    "RootRef",
    "UnknownRoots",
    "conf_from_retract",
    "dead_letter_effects",
    "declare_output",
    "declared_outputs",
    "find_effects",
    "parse_retract_conf",
    "plan_retract",
    "retract_history",
    "root_effects",
    "run_retract",
]
