from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LabelValidation")


@_attrs_define
class LabelValidation:
    """Counts over the label column.

    Attributes:
        column (str):
        missing (int): Empty or absent label cells.
        outside_declared (int): Binary/categorical labels: values outside the declared set.
        unparseable (int): Numeric labels: non-empty cells that are not numbers.
        oversize (int | Unset): Cells longer than DPFIT_MAX_CELL_BYTES (read as missing; not counted in `missing`).
            Default: 0.
    """

    column: str
    missing: int
    outside_declared: int
    unparseable: int
    oversize: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        column = self.column

        missing = self.missing

        outside_declared = self.outside_declared

        unparseable = self.unparseable

        oversize = self.oversize

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "column": column,
                "missing": missing,
                "outside_declared": outside_declared,
                "unparseable": unparseable,
            }
        )
        if oversize is not UNSET:
            field_dict["oversize"] = oversize

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        column = d.pop("column")

        missing = d.pop("missing")

        outside_declared = d.pop("outside_declared")

        unparseable = d.pop("unparseable")

        oversize = d.pop("oversize", UNSET)

        label_validation = cls(
            column=column,
            missing=missing,
            outside_declared=outside_declared,
            unparseable=unparseable,
            oversize=oversize,
        )

        label_validation.additional_properties = d
        return label_validation

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
