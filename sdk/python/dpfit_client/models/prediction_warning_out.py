from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.prediction_warning_out_kind import PredictionWarningOutKind

T = TypeVar("T", bound="PredictionWarningOut")


@_attrs_define
class PredictionWarningOut:
    """
    Attributes:
        row (int): 0-based index of the row in the request.
        column (str): The feature column.
        kind (PredictionWarningOutKind):
        message (str): What was done to the value.
    """

    row: int
    column: str
    kind: PredictionWarningOutKind
    message: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        row = self.row

        column = self.column

        kind = self.kind.value

        message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "row": row,
                "column": column,
                "kind": kind,
                "message": message,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        row = d.pop("row")

        column = d.pop("column")

        kind = PredictionWarningOutKind(d.pop("kind"))

        message = d.pop("message")

        prediction_warning_out = cls(
            row=row,
            column=column,
            kind=kind,
            message=message,
        )

        prediction_warning_out.additional_properties = d
        return prediction_warning_out

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
