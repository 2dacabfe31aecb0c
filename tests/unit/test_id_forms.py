"""Root ids as people see and paste them: `ids.format_id` and `ids.parse_id`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackfold.ledger.reading.parse import QueryError, parse_root_id
from ackfold.ledger.schema import ids

I64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@given(I64)
def test_format_then_parse_is_the_identity(value: int) -> None:
    shown = ids.format_id(value)
    assert shown.startswith("0x")
    assert len(shown) == 18
    assert shown == shown.lower()
    assert ids.parse_id(shown) == value


@given(I64)
def test_every_pasted_form_parses_to_the_stored_bigint(value: int) -> None:
    unsigned = value & ((1 << 64) - 1)
    shown = ids.format_id(value)
    # 16 bare digits 0-9 are ambiguous (below): a + says decimal.
    signed, plain = (f"+{n}" if n >= 0 and len(str(n)) == 16 else str(n) for n in (value, unsigned))
    forms = [shown, shown.upper().replace("0X", "0x"), signed, f"  {signed}\n", plain]
    if not shown[2:].isdigit():  # 16 digits 0-9 without 0x are ambiguous (below)
        forms.append(shown[2:])
    assert {ids.parse_id(form) for form in forms} == {value}


@given(st.one_of(st.integers(min_value=1 << 64), st.integers(max_value=-(1 << 63) - 1)))
def test_values_outside_64_bits_are_a_clear_error(value: int) -> None:
    for text in (str(value), hex(value) if value > 0 else str(value)):
        if len(text) > 40:
            with pytest.raises(ids.IdError, match="is not a 64-bit id"):
                ids.parse_id(text)
        else:
            with pytest.raises(ids.IdError, match="out of range"):
                ids.parse_id(text)
    with pytest.raises(ids.IdError, match="signed 64-bit"):
        ids.format_id(value)


@given(st.text(max_size=60))
def test_any_text_parses_or_raises_the_id_error(text: str) -> None:
    try:
        value = ids.parse_id(text)
    except ids.IdError:
        return
    assert -(1 << 63) <= value < (1 << 63)


def test_the_bounds() -> None:
    assert ids.parse_id("-9223372036854775808") == -(1 << 63)
    assert ids.parse_id("18446744073709551615") == -1
    assert ids.parse_id("0xffffffffffffffff") == -1
    assert ids.parse_id("0x8000000000000000") == -(1 << 63)
    assert ids.parse_id("9223372036854775807") == (1 << 63) - 1
    with pytest.raises(ids.IdError, match="out of range"):
        ids.parse_id("0x1ffffffffffffffff")
    with pytest.raises(ids.IdError, match="out of range"):
        ids.parse_id("-9223372036854775809")


def test_sixteen_bare_digits_are_refused_with_both_readings() -> None:
    with pytest.raises(ids.IdError, match=r"0x1234567890123456 for hex, or \+1234567890123456"):
        ids.parse_id("1234567890123456")
    assert ids.parse_id("0x1234567890123456") == 0x1234567890123456
    assert ids.parse_id("+1234567890123456") == 1234567890123456


@pytest.mark.parametrize("text", ["", " ", "0x", "12g", "-0x1", "1.5", "1g5", "0x 12", "１２"])
def test_text_that_is_no_id_names_the_forms(text: str) -> None:
    with pytest.raises(ids.IdError, match="0x and 16 hex digits"):
        ids.parse_id(text)


def test_the_cli_and_ui_parser_raises_a_query_error() -> None:
    assert parse_root_id("0x000000000000002a") == 42
    with pytest.raises(QueryError, match="out of range"):
        parse_root_id("99999999999999999999")


def test_shown_ids_formats_id_fields_only() -> None:
    row = {"root_id": 5, "attempt": 2, "xor_acc": "0x01", "root_ids": [5, -1], "new_root_id": None}
    assert ids.shown_ids(row) == {
        "root_id": "0x0000000000000005",
        "attempt": 2,
        "xor_acc": "0x01",
        "root_ids": ["0x0000000000000005", "0xffffffffffffffff"],
        "new_root_id": None,
    }
