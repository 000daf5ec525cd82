from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.evaluation_out_status import EvaluationOutStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.evaluation_out_metrics_type_0 import EvaluationOutMetricsType0
    from ..models.evaluation_out_plan import EvaluationOutPlan
    from ..models.privacy_out import PrivacyOut


T = TypeVar("T", bound="EvaluationOut")


@_attrs_define
class EvaluationOut:
    """A private evaluation: an ordinary job (charged on the dataset's ledger) whose result is
    noised metrics of the model on the dataset's rows.

        Attributes:
            id (str): The evaluation job's id (also shown by GET /v1/jobs/{id}).
            model_id (str):
            dataset_id (str):
            status (EvaluationOutStatus):
            privacy (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
                looser rules are still shown.
            plan (EvaluationOutPlan): Public release plan: Gaussian noise σ per released sum, sensitivity, clip.
            created_at (datetime.datetime):
            metrics (EvaluationOutMetricsType0 | None | Unset): When succeeded: noised accuracy, log_loss and
                confusion_matrix (binary), accuracy, confusion_matrix (K × K: rows true class, columns predicted, in the label's
                declared order) and undeclared_label_predictions (categorical; accuracy alone above 256 declared classes, as the
                plan's warnings say) or mean_squared_error (regression).
            error (None | str | Unset):
            refunded (bool | Unset): Whether its charge was refunded (e.g. cancelled before a worker read the data), as GET
                /v1/jobs/{id} says. Default: False.
            finished_at (datetime.datetime | None | Unset):
    """

    id: str
    model_id: str
    dataset_id: str
    status: EvaluationOutStatus
    privacy: PrivacyOut
    plan: EvaluationOutPlan
    created_at: datetime.datetime
    metrics: EvaluationOutMetricsType0 | None | Unset = UNSET
    error: None | str | Unset = UNSET
    refunded: bool | Unset = False
    finished_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.evaluation_out_metrics_type_0 import EvaluationOutMetricsType0  # noqa: PLC0415

        id = self.id

        model_id = self.model_id

        dataset_id = self.dataset_id

        status = self.status.value

        privacy = self.privacy.to_dict()

        plan = self.plan.to_dict()

        created_at = self.created_at.isoformat()

        metrics: dict[str, Any] | None | Unset
        if isinstance(self.metrics, Unset):
            metrics = UNSET
        elif isinstance(self.metrics, EvaluationOutMetricsType0):
            metrics = self.metrics.to_dict()
        else:
            metrics = self.metrics

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        refunded = self.refunded

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
                "model_id": model_id,
                "dataset_id": dataset_id,
                "status": status,
                "privacy": privacy,
                "plan": plan,
                "created_at": created_at,
            }
        )
        if metrics is not UNSET:
            field_dict["metrics"] = metrics
        if error is not UNSET:
            field_dict["error"] = error
        if refunded is not UNSET:
            field_dict["refunded"] = refunded
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.evaluation_out_metrics_type_0 import EvaluationOutMetricsType0  # noqa: PLC0415
        from ..models.evaluation_out_plan import EvaluationOutPlan  # noqa: PLC0415
        from ..models.privacy_out import PrivacyOut  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        model_id = d.pop("model_id")

        dataset_id = d.pop("dataset_id")

        status = EvaluationOutStatus(d.pop("status"))

        privacy = PrivacyOut.from_dict(d.pop("privacy"))

        plan = EvaluationOutPlan.from_dict(d.pop("plan"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_metrics(data: object) -> EvaluationOutMetricsType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metrics_type_0 = EvaluationOutMetricsType0.from_dict(data)

                return metrics_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EvaluationOutMetricsType0 | None | Unset, data)

        metrics = _parse_metrics(d.pop("metrics", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        refunded = d.pop("refunded", UNSET)

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

        evaluation_out = cls(
            id=id,
            model_id=model_id,
            dataset_id=dataset_id,
            status=status,
            privacy=privacy,
            plan=plan,
            created_at=created_at,
            metrics=metrics,
            error=error,
            refunded=refunded,
            finished_at=finished_at,
        )

        evaluation_out.additional_properties = d
        return evaluation_out

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
