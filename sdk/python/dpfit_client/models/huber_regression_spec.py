from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="HuberRegressionSpec")


@_attrs_define
class HuberRegressionSpec:
    """Linear regression with the Huber loss h_δ(w·x − y) and a declared label bound.

    Attributes:
        type_ (Literal['huber_regression']): Model family: linear regression with the Huber loss h_δ(w·x − y) (quadratic
            for |residual| ≤ δ, linear beyond); L = δ, β = 1, convex.
        label_bound (float): B: the declared public bound on the label, |y| ≤ B. Required, because it is a public
            promise about the data: the loader clips every label to [−B, B] (how many were clipped is never released).
            Choose it from domain knowledge, not from the data.
        l2 (float | Unset): L2 regularisation μ of the objective (1/n) Σ ℓ(w; x_i, y_i) + (μ/2)‖w‖² + l1‖w‖₁ (per-row-
            averaged; scikit-learn's C equals 1/(n·μ)). μ > 0 makes the objective strongly convex (for a convex loss), which
            bounds the sensitivity independently of the iteration count. Default: 0.0001.
        l1 (float | Unset): L1 regularisation weight of the term l1‖w‖₁ (elastic net together with l2). Non-smooth: only
            proximal optimizers (dp_svrg) accept l1 > 0; the others reject the job. Default: 0.0.
        fit_intercept (bool | Unset): Append a constant feature for the intercept. It lies inside the row-norm bound
            ‖x‖₂ ≤ 1 and is regularised (l2 and l1) like the other coefficients. Default: True.
        huber_delta (float | Unset): δ: residuals up to δ are penalised quadratically, larger ones linearly. It is the
            Lipschitz constant L = δ, so the noise scales with δ; residuals are in label units. Default: 1.0.
    """

    type_: Literal["huber_regression"]
    label_bound: float
    l2: float | Unset = 0.0001
    l1: float | Unset = 0.0
    fit_intercept: bool | Unset = True
    huber_delta: float | Unset = 1.0

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        label_bound = self.label_bound

        l2 = self.l2

        l1 = self.l1

        fit_intercept = self.fit_intercept

        huber_delta = self.huber_delta

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "label_bound": label_bound,
            }
        )
        if l2 is not UNSET:
            field_dict["l2"] = l2
        if l1 is not UNSET:
            field_dict["l1"] = l1
        if fit_intercept is not UNSET:
            field_dict["fit_intercept"] = fit_intercept
        if huber_delta is not UNSET:
            field_dict["huber_delta"] = huber_delta

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["huber_regression"], d.pop("type"))
        if type_ != "huber_regression":
            raise ValueError(f"type must match const 'huber_regression', got '{type_}'")

        label_bound = d.pop("label_bound")

        l2 = d.pop("l2", UNSET)

        l1 = d.pop("l1", UNSET)

        fit_intercept = d.pop("fit_intercept", UNSET)

        huber_delta = d.pop("huber_delta", UNSET)

        huber_regression_spec = cls(
            type_=type_,
            label_bound=label_bound,
            l2=l2,
            l1=l1,
            fit_intercept=fit_intercept,
            huber_delta=huber_delta,
        )

        return huber_regression_spec
