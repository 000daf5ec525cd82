from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.prediction_warning_out import PredictionWarningOut


T = TypeVar("T", bound="PredictResponse")


@_attrs_define
class PredictResponse:
    """
    Attributes:
        predictions (list[bool | float | int | str]): Classification: the dataset's label values; regression: w·x.
        probabilities (list[float] | None): Binary: the model's score for the positive class; multiclass: the predicted
            class's probability (the softmax of a joint model's K scores, the normalised scores of a one-vs-rest model);
            regression: null.
        warnings (list[PredictionWarningOut] | Unset): Cells of your rows whose encoding changed their meaning, row by
            row: a value that is not a declared category (scored as none of them), a number outside the declared [min, max]
            (clipped), a missing or unconvertible value (scored as missing). Computed from your rows and the public schema
            only. At most 1000 are listed.
        warnings_total (int | Unset): How many warnings there are (more than listed past 1000). Default: 0.
    """

    predictions: list[bool | float | int | str]
    probabilities: list[float] | None
    warnings: list[PredictionWarningOut] | Unset = UNSET
    warnings_total: int | Unset = 0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        predictions = []
        for predictions_item_data in self.predictions:
            predictions_item: bool | float | int | str
            predictions_item = predictions_item_data
            predictions.append(predictions_item)

        probabilities: list[float] | None
        if isinstance(self.probabilities, list):
            probabilities = self.probabilities

        else:
            probabilities = self.probabilities

        warnings: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.warnings, Unset):
            warnings = []
            for warnings_item_data in self.warnings:
                warnings_item = warnings_item_data.to_dict()
                warnings.append(warnings_item)

        warnings_total = self.warnings_total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "predictions": predictions,
                "probabilities": probabilities,
            }
        )
        if warnings is not UNSET:
            field_dict["warnings"] = warnings
        if warnings_total is not UNSET:
            field_dict["warnings_total"] = warnings_total

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.prediction_warning_out import PredictionWarningOut  # noqa: PLC0415

        d = dict(src_dict)
        predictions = []
        _predictions = d.pop("predictions")
        for predictions_item_data in _predictions:

            def _parse_predictions_item(data: object) -> bool | float | int | str:
                return cast(bool | float | int | str, data)

            predictions_item = _parse_predictions_item(predictions_item_data)

            predictions.append(predictions_item)

        def _parse_probabilities(data: object) -> list[float] | None:
            if data is None:
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                probabilities_type_0 = cast(list[float], data)

                return probabilities_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[float] | None, data)

        probabilities = _parse_probabilities(d.pop("probabilities"))

        _warnings = d.pop("warnings", UNSET)
        warnings: list[PredictionWarningOut] | Unset = UNSET
        if _warnings is not UNSET:
            warnings = []
            for warnings_item_data in _warnings:
                warnings_item = PredictionWarningOut.from_dict(warnings_item_data)

                warnings.append(warnings_item)

        warnings_total = d.pop("warnings_total", UNSET)

        predict_response = cls(
            predictions=predictions,
            probabilities=probabilities,
            warnings=warnings,
            warnings_total=warnings_total,
        )

        predict_response.additional_properties = d
        return predict_response

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
