from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.job_estimate_out_accounting import JobEstimateOutAccounting

if TYPE_CHECKING:
    from ..models.job_estimate_out_plan import JobEstimateOutPlan
    from ..models.privacy_out import PrivacyOut


T = TypeVar("T", bound="JobEstimateOut")


@_attrs_define
class JobEstimateOut:
    """What `POST /v1/jobs` would do with this body now; nothing is charged or written. The
    job's own (ε, δ) is `privacy`, the dataset's total budget `budget`; the top-level `epsilon`
    and `delta` are the budget's, deprecated (kept for existing clients).

        Attributes:
            dataset_id (str):
            admissible (bool): Whether the budget (and your cap) admits the job now.
            reason (str): Why it fits, or why not and what remains.
            privacy (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
                looser rules are still shown.
            budget (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
                looser rules are still shown.
            epsilon (float): Deprecated: the dataset's total ε_B (= `budget.epsilon`), NOT the job's ε (that is
                `privacy.epsilon`).
            delta (float): Deprecated: the dataset's total δ_B (= `budget.delta`), NOT the job's δ (that is
                `privacy.delta`).
            epsilon_spent (float): ε spent at δ_B before the job.
            epsilon_spent_after (float): ε spent at δ_B if the job were charged.
            epsilon_remaining_after (float): ε_B − epsilon_spent_after, at least 0.
            accounting (JobEstimateOutAccounting): How the ledger charges the job: exact Gaussian DP (μ), a Rényi curve, or
                pure ε (basic composition).
            gdp_mu (float | None): The job's exact μ (Gaussian-family jobs).
            mechanism (str):
            noise_scale (float):
            sensitivity (float):
            steps (int):
            plan (JobEstimateOutPlan): The release plan a submission would store.
    """

    dataset_id: str
    admissible: bool
    reason: str
    privacy: PrivacyOut
    budget: PrivacyOut
    epsilon: float
    delta: float
    epsilon_spent: float
    epsilon_spent_after: float
    epsilon_remaining_after: float
    accounting: JobEstimateOutAccounting
    gdp_mu: float | None
    mechanism: str
    noise_scale: float
    sensitivity: float
    steps: int
    plan: JobEstimateOutPlan
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        admissible = self.admissible

        reason = self.reason

        privacy = self.privacy.to_dict()

        budget = self.budget.to_dict()

        epsilon = self.epsilon

        delta = self.delta

        epsilon_spent = self.epsilon_spent

        epsilon_spent_after = self.epsilon_spent_after

        epsilon_remaining_after = self.epsilon_remaining_after

        accounting = self.accounting.value

        gdp_mu: float | None
        gdp_mu = self.gdp_mu

        mechanism = self.mechanism

        noise_scale = self.noise_scale

        sensitivity = self.sensitivity

        steps = self.steps

        plan = self.plan.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "admissible": admissible,
                "reason": reason,
                "privacy": privacy,
                "budget": budget,
                "epsilon": epsilon,
                "delta": delta,
                "epsilon_spent": epsilon_spent,
                "epsilon_spent_after": epsilon_spent_after,
                "epsilon_remaining_after": epsilon_remaining_after,
                "accounting": accounting,
                "gdp_mu": gdp_mu,
                "mechanism": mechanism,
                "noise_scale": noise_scale,
                "sensitivity": sensitivity,
                "steps": steps,
                "plan": plan,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_estimate_out_plan import JobEstimateOutPlan  # noqa: PLC0415
        from ..models.privacy_out import PrivacyOut  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        admissible = d.pop("admissible")

        reason = d.pop("reason")

        privacy = PrivacyOut.from_dict(d.pop("privacy"))

        budget = PrivacyOut.from_dict(d.pop("budget"))

        epsilon = d.pop("epsilon")

        delta = d.pop("delta")

        epsilon_spent = d.pop("epsilon_spent")

        epsilon_spent_after = d.pop("epsilon_spent_after")

        epsilon_remaining_after = d.pop("epsilon_remaining_after")

        accounting = JobEstimateOutAccounting(d.pop("accounting"))

        def _parse_gdp_mu(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        gdp_mu = _parse_gdp_mu(d.pop("gdp_mu"))

        mechanism = d.pop("mechanism")

        noise_scale = d.pop("noise_scale")

        sensitivity = d.pop("sensitivity")

        steps = d.pop("steps")

        plan = JobEstimateOutPlan.from_dict(d.pop("plan"))

        job_estimate_out = cls(
            dataset_id=dataset_id,
            admissible=admissible,
            reason=reason,
            privacy=privacy,
            budget=budget,
            epsilon=epsilon,
            delta=delta,
            epsilon_spent=epsilon_spent,
            epsilon_spent_after=epsilon_spent_after,
            epsilon_remaining_after=epsilon_remaining_after,
            accounting=accounting,
            gdp_mu=gdp_mu,
            mechanism=mechanism,
            noise_scale=noise_scale,
            sensitivity=sensitivity,
            steps=steps,
            plan=plan,
        )

        job_estimate_out.additional_properties = d
        return job_estimate_out

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
