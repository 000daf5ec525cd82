from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.dataset_source_out_format import DatasetSourceOutFormat

T = TypeVar("T", bound="DatasetSourceOut")


@_attrs_define
class DatasetSourceOut:
    """
    Attributes:
        uri (str): The URI the owner registered.
        format_ (DatasetSourceOutFormat):
    """

    uri: str
    format_: DatasetSourceOutFormat
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        uri = self.uri

        format_ = self.format_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "uri": uri,
                "format": format_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        uri = d.pop("uri")

        format_ = DatasetSourceOutFormat(d.pop("format"))

        dataset_source_out = cls(
            uri=uri,
            format_=format_,
        )

        dataset_source_out.additional_properties = d
        return dataset_source_out

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
