from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.model_out_encoding import ModelOutEncoding
    from ..models.model_out_model import ModelOutModel
    from ..models.model_privacy import ModelPrivacy


T = TypeVar("T", bound="ModelOut")


@_attrs_define
class ModelOut:
    """
    Attributes:
        id (str):
        job_id (str):
        dataset_id (str):
        model (ModelOutModel):
        coefficients (list[float] | list[list[float]]): One weight per encoded feature; for a categorical label, one row
            per class.
        intercept (float | list[float] | None):
        feature_names (list[str]):
        encoding (ModelOutEncoding): The public encoding the coefficients apply to.
        privacy (ModelPrivacy):
        created_at (datetime.datetime):
        classes (list[bool | float | int | str] | None | Unset): Categorical labels: the class of each coefficient row.
    """

    id: str
    job_id: str
    dataset_id: str
    model: ModelOutModel
    coefficients: list[float] | list[list[float]]
    intercept: float | list[float] | None
    feature_names: list[str]
    encoding: ModelOutEncoding
    privacy: ModelPrivacy
    created_at: datetime.datetime
    classes: list[bool | float | int | str] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        job_id = self.job_id

        dataset_id = self.dataset_id

        model = self.model.to_dict()

        coefficients: list[float] | list[list[float]]
        if isinstance(self.coefficients, list):
            coefficients = self.coefficients

        else:
            coefficients = []
            for coefficients_type_1_item_data in self.coefficients:
                coefficients_type_1_item = coefficients_type_1_item_data

                coefficients.append(coefficients_type_1_item)

        intercept: float | list[float] | None
        if isinstance(self.intercept, list):
            intercept = self.intercept

        else:
            intercept = self.intercept

        feature_names = self.feature_names

        encoding = self.encoding.to_dict()

        privacy = self.privacy.to_dict()

        created_at = self.created_at.isoformat()

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
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "job_id": job_id,
                "dataset_id": dataset_id,
                "model": model,
                "coefficients": coefficients,
                "intercept": intercept,
                "feature_names": feature_names,
                "encoding": encoding,
                "privacy": privacy,
                "created_at": created_at,
            }
        )
        if classes is not UNSET:
            field_dict["classes"] = classes

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.model_out_encoding import ModelOutEncoding  # noqa: PLC0415
        from ..models.model_out_model import ModelOutModel  # noqa: PLC0415
        from ..models.model_privacy import ModelPrivacy  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        job_id = d.pop("job_id")

        dataset_id = d.pop("dataset_id")

        model = ModelOutModel.from_dict(d.pop("model"))

        def _parse_coefficients(data: object) -> list[float] | list[list[float]]:
            try:
                if not isinstance(data, list):
                    raise TypeError()
                coefficients_type_0 = cast(list[float], data)

                return coefficients_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, list):
                raise TypeError()
            coefficients_type_1 = []
            _coefficients_type_1 = data
            for coefficients_type_1_item_data in _coefficients_type_1:
                coefficients_type_1_item = cast(list[float], coefficients_type_1_item_data)

                coefficients_type_1.append(coefficients_type_1_item)

            return coefficients_type_1

        coefficients = _parse_coefficients(d.pop("coefficients"))

        def _parse_intercept(data: object) -> float | list[float] | None:
            if data is None:
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                intercept_type_1 = cast(list[float], data)

                return intercept_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(float | list[float] | None, data)

        intercept = _parse_intercept(d.pop("intercept"))

        feature_names = cast(list[str], d.pop("feature_names"))

        encoding = ModelOutEncoding.from_dict(d.pop("encoding"))

        privacy = ModelPrivacy.from_dict(d.pop("privacy"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

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

        model_out = cls(
            id=id,
            job_id=job_id,
            dataset_id=dataset_id,
            model=model,
            coefficients=coefficients,
            intercept=intercept,
            feature_names=feature_names,
            encoding=encoding,
            privacy=privacy,
            created_at=created_at,
            classes=classes,
        )

        model_out.additional_properties = d
        return model_out

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
