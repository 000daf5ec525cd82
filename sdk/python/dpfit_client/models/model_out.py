from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

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
        coefficients (list[float]):
        intercept (float | None):
        feature_names (list[str]):
        encoding (ModelOutEncoding): The public encoding the coefficients apply to.
        privacy (ModelPrivacy):
        created_at (datetime.datetime):
    """

    id: str
    job_id: str
    dataset_id: str
    model: ModelOutModel
    coefficients: list[float]
    intercept: float | None
    feature_names: list[str]
    encoding: ModelOutEncoding
    privacy: ModelPrivacy
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        job_id = self.job_id

        dataset_id = self.dataset_id

        model = self.model.to_dict()

        coefficients = self.coefficients

        intercept: float | None
        intercept = self.intercept

        feature_names = self.feature_names

        encoding = self.encoding.to_dict()

        privacy = self.privacy.to_dict()

        created_at = self.created_at.isoformat()

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

        coefficients = cast(list[float], d.pop("coefficients"))

        def _parse_intercept(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        intercept = _parse_intercept(d.pop("intercept"))

        feature_names = cast(list[str], d.pop("feature_names"))

        encoding = ModelOutEncoding.from_dict(d.pop("encoding"))

        privacy = ModelPrivacy.from_dict(d.pop("privacy"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

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
