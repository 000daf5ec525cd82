from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.dataset_source_format_type_0 import DatasetSourceFormatType0
from ..types import UNSET, Unset

T = TypeVar("T", bound="DatasetSource")


@_attrs_define
class DatasetSource:
    """
    Attributes:
        uri (str): A path relative to an allowed data root, a file:// URI inside one, s3://bucket/key under an s3://
            data root, or sql://<connection>/[<schema>.]<table> of an operator-configured connection.
        format_ (DatasetSourceFormatType0 | None | Unset): Detected from the suffix when omitted (a folder is Parquet);
            ignored for s3:// and sql:// sources.
    """

    uri: str
    format_: DatasetSourceFormatType0 | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        uri = self.uri

        format_: None | str | Unset
        if isinstance(self.format_, Unset):
            format_ = UNSET
        elif isinstance(self.format_, DatasetSourceFormatType0):
            format_ = self.format_.value
        else:
            format_ = self.format_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "uri": uri,
            }
        )
        if format_ is not UNSET:
            field_dict["format"] = format_

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        uri = d.pop("uri")

        def _parse_format_(data: object) -> DatasetSourceFormatType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                format_type_0 = DatasetSourceFormatType0(data)

                return format_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DatasetSourceFormatType0 | None | Unset, data)

        format_ = _parse_format_(d.pop("format", UNSET))

        dataset_source = cls(
            uri=uri,
            format_=format_,
        )

        return dataset_source
