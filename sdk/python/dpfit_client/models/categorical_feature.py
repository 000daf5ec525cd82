from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CategoricalFeature")


@_attrs_define
class CategoricalFeature:
    """A categorical column with its declared public category list (one-hot encoded).

    Values outside the list encode as all zeros.

        Attributes:
            name (str): Column name in the source.
            categories (list[bool | float | int | str]): Declared public categories.
            type_ (Literal['categorical'] | Unset):  Default: 'categorical'.
    """

    name: str
    categories: list[bool | float | int | str]
    type_: Literal["categorical"] | Unset = "categorical"

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        categories = []
        for categories_item_data in self.categories:
            categories_item: bool | float | int | str
            categories_item = categories_item_data
            categories.append(categories_item)

        type_ = self.type_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "categories": categories,
            }
        )
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        categories = []
        _categories = d.pop("categories")
        for categories_item_data in _categories:

            def _parse_categories_item(data: object) -> bool | float | int | str:
                return cast(bool | float | int | str, data)

            categories_item = _parse_categories_item(categories_item_data)

            categories.append(categories_item)

        type_ = cast(Literal["categorical"] | Unset, d.pop("type", UNSET))
        if type_ != "categorical" and not isinstance(type_, Unset):
            raise ValueError(f"type must match const 'categorical', got '{type_}'")

        categorical_feature = cls(
            name=name,
            categories=categories,
            type_=type_,
        )

        return categorical_feature
