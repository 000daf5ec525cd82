"""service/api/strict_json.py: a name repeated within one JSON object is refused, wherever the
object sits; the same name in two objects, or as a value, is not a repeat."""

from __future__ import annotations

import json

import pytest

from service.api.strict_json import DUPLICATE_KEY, loads


def test_names_repeated_in_different_objects_parse_as_json_does() -> None:
    text = '{"a": {"b": 1}, "c": {"b": 2}, "d": [{"b": 1}, {"b": "b"}], "b": "a"}'
    assert loads(text.encode()) == json.loads(text)
    assert loads(text.encode("utf-16")) == json.loads(text)  # JSON's other encodings, as before


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 1}',
        '{"x": [1, {"a": 1, "b": 2, "a": 3}]}',
        '[{"ok": 1}, {"deep": {"deeper": {"a": null, "a": null}}}]',
    ],
)
def test_a_name_repeated_within_one_object_is_a_decoding_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        loads(text.encode())
    assert raised.value.msg == f'{DUPLICATE_KEY} ("a")'


def test_an_unsafe_or_long_repeated_name_is_not_quoted() -> None:
    for name in ("a\u0000b", "k" * 65):
        with pytest.raises(json.JSONDecodeError) as raised:
            loads(json.dumps({name: 1})[:-1].encode() + b", " + json.dumps(name).encode() + b": 2}")
        assert raised.value.msg == DUPLICATE_KEY
