"""A Griffe extension for the docs site (mkdocs.yml): ackfold's docstrings title their
doctests `Example:` (or `Example (a note):`), which Griffe's Google style reads as an
admonition, not as examples. This renames the title, so that mkdocstrings renders the
doctests as code, with the note as a line of text before them."""

from __future__ import annotations

import re
from typing import Any

import griffe

_TITLE = re.compile(r"^(?P<indent>[ \t]*)Example(?: \((?P<note>.+)\))?:[ \t]*$", re.MULTILINE)


def _rename(match: re.Match[str]) -> str:
    indent, note = match["indent"], match["note"]
    title = f"{indent}Examples:"
    return f"{title}\n{indent}    {note[0].upper()}{note[1:]}:" if note else title


class ExampleSections(griffe.Extension):
    """`Example:` titles become `Examples:` sections."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _TITLE.sub(_rename, obj.docstring.value)
