"""Boolean annotation values: the one parser the validating webhook and the job reconciler share.

Annotations are strings; Kueue reads its boolean ones with Go's strconv.ParseBool. tasq accepts the
word spellings of it only (true/True/TRUE, false/False/FALSE), so what the webhook admits is
exactly what admission reads as a boolean, and anything else is neither true nor false.
"""

from __future__ import annotations

from typing import Final

TRUE_VALUES: Final = ("true", "True", "TRUE")
FALSE_VALUES: Final = ("false", "False", "FALSE")
BOOLEAN_VALUES: Final = ("true", "false", "True", "False", "TRUE", "FALSE")
"""Every accepted spelling, in the order the validator lists them."""


def parse_boolean(text: str | None) -> bool | None:
    """True or False for an accepted spelling; None for anything else (absent, `yes`, `tRuE`, `1`)."""
    if text in TRUE_VALUES:
        return True
    if text in FALSE_VALUES:
        return False
    return None
