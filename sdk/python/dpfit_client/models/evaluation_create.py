from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_privacy import JobPrivacy


T = TypeVar("T", bound="EvaluationCreate")


@_attrs_define
class EvaluationCreate:
    """
    Attributes:
        dataset_id (str): A dataset you are granted with the model's schema: the training dataset or a holdout its owner
            registered. Its ledger pays for the evaluation.
        privacy (JobPrivacy):
        loss_clip (float | None | Unset): Declared clip B of each row's loss (log-loss, or squared error); binary and
            numeric labels only (a categorical label's evaluation releases accuracy and a confusion matrix, no loss, and
            refuses loss_clip). A normal positive float64 (at least 2.2e-308). Default: the largest loss any row within the
            declared bounds can have under this model (log(1 + e^‖w‖), or (‖w‖ + label bound)²), so nothing is clipped.
    """

    dataset_id: str
    privacy: JobPrivacy
    loss_clip: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        privacy = self.privacy.to_dict()

        loss_clip: float | None | Unset
        if isinstance(self.loss_clip, Unset):
            loss_clip = UNSET
        else:
            loss_clip = self.loss_clip

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "dataset_id": dataset_id,
                "privacy": privacy,
            }
        )
        if loss_clip is not UNSET:
            field_dict["loss_clip"] = loss_clip

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_privacy import JobPrivacy  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        privacy = JobPrivacy.from_dict(d.pop("privacy"))

        def _parse_loss_clip(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        loss_clip = _parse_loss_clip(d.pop("loss_clip", UNSET))

        evaluation_create = cls(
            dataset_id=dataset_id,
            privacy=privacy,
            loss_clip=loss_clip,
        )

        return evaluation_create
