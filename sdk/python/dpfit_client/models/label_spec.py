from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.label_spec_type import LabelSpecType
from ..types import UNSET, Unset

T = TypeVar("T", bound="LabelSpec")


@_attrs_define
class LabelSpec:
    """The label column: binary (which value is positive, which negative) or numeric.

    Binary labels map to ±1; rows whose label is not ``positive`` count as negative. Numeric
    labels (for regression models) are read as numbers, missing/non-numeric values as 0, and
    clipped to the model's declared public ``label_bound`` when a job reads them.

        Attributes:
            column (str):
            type_ (LabelSpecType | Unset): binary: classification; categorical: multiclass (a joint multinomial model, or
                one-vs-rest); numeric: regression. Default: LabelSpecType.BINARY.
            positive (bool | float | int | None | str | Unset): Binary labels: the value of the positive class.
            negative (bool | float | int | None | str | Unset): Binary labels: the value of the negative class.
            classes (list[bool | float | int | str] | None | Unset): Categorical labels: the declared public classes (rows
                with any other value belong to none of them).
    """

    column: str
    type_: LabelSpecType | Unset = LabelSpecType.BINARY
    positive: bool | float | int | None | str | Unset = UNSET
    negative: bool | float | int | None | str | Unset = UNSET
    classes: list[bool | float | int | str] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        column = self.column

        type_: str | Unset = UNSET
        if not isinstance(self.type_, Unset):
            type_ = self.type_.value

        positive: bool | float | int | None | str | Unset
        if isinstance(self.positive, Unset):
            positive = UNSET
        else:
            positive = self.positive

        negative: bool | float | int | None | str | Unset
        if isinstance(self.negative, Unset):
            negative = UNSET
        else:
            negative = self.negative

        classes: list[bool | float | int | str] | None | Unset
        if isinstance(self.classes, Unset):
            classes = UNSET
        elif isinstance(self.classes, list):
            classes = []
            for classes_type_0_item_data in self.classes:
                classes_type_0_item: bool | float | int | str
                classes_type_0_item = classes_type_0_item_data
                classes.append(classes_type_0_item)

        else:
            classes = self.classes

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "column": column,
            }
        )
        if type_ is not UNSET:
            field_dict["type"] = type_
        if positive is not UNSET:
            field_dict["positive"] = positive
        if negative is not UNSET:
            field_dict["negative"] = negative
        if classes is not UNSET:
            field_dict["classes"] = classes

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        column = d.pop("column")

        _type_ = d.pop("type", UNSET)
        type_: LabelSpecType | Unset
        if isinstance(_type_, Unset):
            type_ = UNSET
        else:
            type_ = LabelSpecType(_type_)

        def _parse_positive(data: object) -> bool | float | int | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | float | int | None | str | Unset, data)

        positive = _parse_positive(d.pop("positive", UNSET))

        def _parse_negative(data: object) -> bool | float | int | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | float | int | None | str | Unset, data)

        negative = _parse_negative(d.pop("negative", UNSET))

        def _parse_classes(data: object) -> list[bool | float | int | str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                classes_type_0 = []
                _classes_type_0 = data
                for classes_type_0_item_data in _classes_type_0:

                    def _parse_classes_type_0_item(data: object) -> bool | float | int | str:
                        return cast(bool | float | int | str, data)

                    classes_type_0_item = _parse_classes_type_0_item(classes_type_0_item_data)

                    classes_type_0.append(classes_type_0_item)

                return classes_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[bool | float | int | str] | None | Unset, data)

        classes = _parse_classes(d.pop("classes", UNSET))

        label_spec = cls(
            column=column,
            type_=type_,
            positive=positive,
            negative=negative,
            classes=classes,
        )

        return label_spec
