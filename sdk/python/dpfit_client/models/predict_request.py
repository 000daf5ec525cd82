from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.predict_request_rows_item import PredictRequestRowsItem


T = TypeVar("T", bound="PredictRequest")


@_attrs_define
class PredictRequest:
    """
    Attributes:
        rows (list[PredictRequestRowsItem]): Your rows in the dataset's raw schema, one object each: every feature
            column present (null for a missing value), each cell one value — a number, a string, a boolean or null, never an
            array or object. Other keys are ignored.
    """

    rows: list[PredictRequestRowsItem]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for rows_item_data in self.rows:
            rows_item = rows_item_data.to_dict()
            rows.append(rows_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "rows": rows,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.predict_request_rows_item import PredictRequestRowsItem  # noqa: PLC0415

        d = dict(src_dict)
        rows = []
        _rows = d.pop("rows")
        for rows_item_data in _rows:
            rows_item = PredictRequestRowsItem.from_dict(rows_item_data)

            rows.append(rows_item)

        predict_request = cls(
            rows=rows,
        )

        return predict_request
