from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FeatureValidation")


@_attrs_define
class FeatureValidation:
    """Counts over one declared feature column, from parsing the whole source at registration.

    Attributes:
        name (str):
        missing (int): Empty or absent cells (encoded as missing).
        unparseable (int): Non-empty cells that do not convert to the declared type (encoded as missing).
        out_of_bounds (int): Numeric cells outside [min, max] (clipped).
        unknown_category (int): Categorical cells outside the declared categories (all-zero block).
        oversize (int | Unset): Cells longer than DPFIT_MAX_CELL_BYTES (encoded as missing; not counted in `missing`).
            Default: 0.
    """

    name: str
    missing: int
    unparseable: int
    out_of_bounds: int
    unknown_category: int
    oversize: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        missing = self.missing

        unparseable = self.unparseable

        out_of_bounds = self.out_of_bounds

        unknown_category = self.unknown_category

        oversize = self.oversize

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "missing": missing,
                "unparseable": unparseable,
                "out_of_bounds": out_of_bounds,
                "unknown_category": unknown_category,
            }
        )
        if oversize is not UNSET:
            field_dict["oversize"] = oversize

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        missing = d.pop("missing")

        unparseable = d.pop("unparseable")

        out_of_bounds = d.pop("out_of_bounds")

        unknown_category = d.pop("unknown_category")

        oversize = d.pop("oversize", UNSET)

        feature_validation = cls(
            name=name,
            missing=missing,
            unparseable=unparseable,
            out_of_bounds=out_of_bounds,
            unknown_category=unknown_category,
            oversize=oversize,
        )

        feature_validation.additional_properties = d
        return feature_validation

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
