from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PredictResponse")


@_attrs_define
class PredictResponse:
    """
    Attributes:
        predictions (list[bool | float | int | str]): Classification: the dataset's label values; regression: w·x.
        probabilities (list[float] | None): Binary: the model's score for the positive class; multiclass: the normalised
            one-vs-rest score of the predicted class; regression: null.
    """

    predictions: list[bool | float | int | str]
    probabilities: list[float] | None
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

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "predictions": predictions,
                "probabilities": probabilities,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
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

        predict_response = cls(
            predictions=predictions,
            probabilities=probabilities,
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
