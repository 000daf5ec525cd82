from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.feature_validation import FeatureValidation
    from ..models.label_validation import LabelValidation


T = TypeVar("T", bound="ValidationOut")


@_attrs_define
class ValidationOut:
    """The owner's validation report: how the service's reader sees the source. Shown to the
    dataset's owner and to admins only, never to analysts.

        Attributes:
            rows (int):
            features (list[FeatureValidation]):
            label (LabelValidation): Counts over the label column.
    """

    rows: int
    features: list[FeatureValidation]
    label: LabelValidation
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        rows = self.rows

        features = []
        for features_item_data in self.features:
            features_item = features_item_data.to_dict()
            features.append(features_item)

        label = self.label.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "rows": rows,
                "features": features,
                "label": label,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.feature_validation import FeatureValidation  # noqa: PLC0415
        from ..models.label_validation import LabelValidation  # noqa: PLC0415

        d = dict(src_dict)
        rows = d.pop("rows")

        features = []
        _features = d.pop("features")
        for features_item_data in _features:
            features_item = FeatureValidation.from_dict(features_item_data)

            features.append(features_item)

        label = LabelValidation.from_dict(d.pop("label"))

        validation_out = cls(
            rows=rows,
            features=features,
            label=label,
        )

        validation_out.additional_properties = d
        return validation_out

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
