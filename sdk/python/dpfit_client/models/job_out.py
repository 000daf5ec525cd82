from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.job_out_status import JobOutStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_out_model import JobOutModel
    from ..models.job_out_plan import JobOutPlan
    from ..models.optimizer_choice import OptimizerChoice
    from ..models.privacy_out import PrivacyOut
    from ..models.progress import Progress


T = TypeVar("T", bound="JobOut")


@_attrs_define
class JobOut:
    """
    Attributes:
        id (str):
        dataset_id (str):
        status (JobOutStatus):
        progress (Progress):
        model (JobOutModel):
        optimizer (OptimizerChoice):
        privacy (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
            looser rules are still shown.
        plan (JobOutPlan): Public, data-independent release plan: mechanism, noise, sensitivity, steps.
        created_at (datetime.datetime):
        model_id (None | str | Unset):
        error (None | str | Unset):
        refunded (bool | Unset):  Default: False.
        started_at (datetime.datetime | None | Unset):
        finished_at (datetime.datetime | None | Unset):
    """

    id: str
    dataset_id: str
    status: JobOutStatus
    progress: Progress
    model: JobOutModel
    optimizer: OptimizerChoice
    privacy: PrivacyOut
    plan: JobOutPlan
    created_at: datetime.datetime
    model_id: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    refunded: bool | Unset = False
    started_at: datetime.datetime | None | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        dataset_id = self.dataset_id

        status = self.status.value

        progress = self.progress.to_dict()

        model = self.model.to_dict()

        optimizer = self.optimizer.to_dict()

        privacy = self.privacy.to_dict()

        plan = self.plan.to_dict()

        created_at = self.created_at.isoformat()

        model_id: None | str | Unset
        if isinstance(self.model_id, Unset):
            model_id = UNSET
        else:
            model_id = self.model_id

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        refunded = self.refunded

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "dataset_id": dataset_id,
                "status": status,
                "progress": progress,
                "model": model,
                "optimizer": optimizer,
                "privacy": privacy,
                "plan": plan,
                "created_at": created_at,
            }
        )
        if model_id is not UNSET:
            field_dict["model_id"] = model_id
        if error is not UNSET:
            field_dict["error"] = error
        if refunded is not UNSET:
            field_dict["refunded"] = refunded
        if started_at is not UNSET:
            field_dict["started_at"] = started_at
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_out_model import JobOutModel  # noqa: PLC0415
        from ..models.job_out_plan import JobOutPlan  # noqa: PLC0415
        from ..models.optimizer_choice import OptimizerChoice  # noqa: PLC0415
        from ..models.privacy_out import PrivacyOut  # noqa: PLC0415
        from ..models.progress import Progress  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        dataset_id = d.pop("dataset_id")

        status = JobOutStatus(d.pop("status"))

        progress = Progress.from_dict(d.pop("progress"))

        model = JobOutModel.from_dict(d.pop("model"))

        optimizer = OptimizerChoice.from_dict(d.pop("optimizer"))

        privacy = PrivacyOut.from_dict(d.pop("privacy"))

        plan = JobOutPlan.from_dict(d.pop("plan"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_model_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model_id = _parse_model_id(d.pop("model_id", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        refunded = d.pop("refunded", UNSET)

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        job_out = cls(
            id=id,
            dataset_id=dataset_id,
            status=status,
            progress=progress,
            model=model,
            optimizer=optimizer,
            privacy=privacy,
            plan=plan,
            created_at=created_at,
            model_id=model_id,
            error=error,
            refunded=refunded,
            started_at=started_at,
            finished_at=finished_at,
        )

        job_out.additional_properties = d
        return job_out

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
