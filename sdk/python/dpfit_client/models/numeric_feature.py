from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="NumericFeature")


@_attrs_define
class NumericFeature:
    """A numeric column with declared public bounds; values are clipped into [min, max].

    Attributes:
        name (str): Column name in the source.
        min_ (float): Declared public lower bound.
        max_ (float): Declared public upper bound (> min).
        type_ (Literal['numeric'] | Unset):  Default: 'numeric'.
    """

    name: str
    min_: float
    max_: float
    type_: Literal["numeric"] | Unset = "numeric"

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        min_ = self.min_

        max_ = self.max_

        type_ = self.type_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "min": min_,
                "max": max_,
            }
        )
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        min_ = d.pop("min")

        max_ = d.pop("max")

        type_ = cast(Literal["numeric"] | Unset, d.pop("type", UNSET))
        if type_ != "numeric" and not isinstance(type_, Unset):
            raise ValueError(f"type must match const 'numeric', got '{type_}'")

        numeric_feature = cls(
            name=name,
            min_=min_,
            max_=max_,
            type_=type_,
        )

        return numeric_feature
