from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.job_privacy import JobPrivacy
    from ..models.logistic_regression_spec import LogisticRegressionSpec
    from ..models.optimizer_choice import OptimizerChoice


T = TypeVar("T", bound="JobCreate")


@_attrs_define
class JobCreate:
    """
    Attributes:
        dataset_id (str):
        model (LogisticRegressionSpec): Binary logistic regression (labels mapped to −1/+1 by the dataset's label spec).
        optimizer (OptimizerChoice):
        privacy (JobPrivacy):
    """

    dataset_id: str
    model: LogisticRegressionSpec
    optimizer: OptimizerChoice
    privacy: JobPrivacy

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        model = self.model.to_dict()

        optimizer = self.optimizer.to_dict()

        privacy = self.privacy.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "dataset_id": dataset_id,
                "model": model,
                "optimizer": optimizer,
                "privacy": privacy,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_privacy import JobPrivacy  # noqa: PLC0415
        from ..models.logistic_regression_spec import LogisticRegressionSpec  # noqa: PLC0415
        from ..models.optimizer_choice import OptimizerChoice  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        model = LogisticRegressionSpec.from_dict(d.pop("model"))

        optimizer = OptimizerChoice.from_dict(d.pop("optimizer"))

        privacy = JobPrivacy.from_dict(d.pop("privacy"))

        job_create = cls(
            dataset_id=dataset_id,
            model=model,
            optimizer=optimizer,
            privacy=privacy,
        )

        return job_create
