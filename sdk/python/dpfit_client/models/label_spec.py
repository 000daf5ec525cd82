from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="LabelSpec")


@_attrs_define
class LabelSpec:
    """A binary label column: which value is positive and which is negative.

    Rows whose label is not ``positive`` count as negative.

        Attributes:
            column (str):
            positive (bool | float | int | str): The label value of the positive class.
            negative (bool | float | int | str): The label value of the negative class.
    """

    column: str
    positive: bool | float | int | str
    negative: bool | float | int | str

    def to_dict(self) -> dict[str, Any]:
        column = self.column

        positive: bool | float | int | str
        positive = self.positive

        negative: bool | float | int | str
        negative = self.negative

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "column": column,
                "positive": positive,
                "negative": negative,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        column = d.pop("column")

        def _parse_positive(data: object) -> bool | float | int | str:
            return cast(bool | float | int | str, data)

        positive = _parse_positive(d.pop("positive"))

        def _parse_negative(data: object) -> bool | float | int | str:
            return cast(bool | float | int | str, data)

        negative = _parse_negative(d.pop("negative"))

        label_spec = cls(
            column=column,
            positive=positive,
            negative=negative,
        )

        return label_spec
