from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CauchyRegressionSpec")


@_attrs_define
class CauchyRegressionSpec:
    """Linear regression with the Cauchy loss (c²/2) log(1 + (w·x − y)²/c²).

    Attributes:
        type_ (Literal['cauchy_regression']): Model family: robust linear regression with the non-convex Cauchy loss
            (c²/2)·log(1 + (w·x − y)²/c²); L = c/2, β = 1. Needs an optimizer for non-convex objectives.
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
        cauchy_scale (float | Unset): c: residuals well below c are penalised like least squares, larger ones only
            logarithmically. It sets the Lipschitz constant L = c/2 (label units). Default: 1.0.
    """

    type_: Literal["cauchy_regression"]
    label_bound: float
    l2: float | Unset = 0.0001
    l1: float | Unset = 0.0
    fit_intercept: bool | Unset = True
    cauchy_scale: float | Unset = 1.0

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        label_bound = self.label_bound

        l2 = self.l2

        l1 = self.l1

        fit_intercept = self.fit_intercept

        cauchy_scale = self.cauchy_scale

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
        if cauchy_scale is not UNSET:
            field_dict["cauchy_scale"] = cauchy_scale

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["cauchy_regression"], d.pop("type"))
        if type_ != "cauchy_regression":
            raise ValueError(f"type must match const 'cauchy_regression', got '{type_}'")

        label_bound = d.pop("label_bound")

        l2 = d.pop("l2", UNSET)

        l1 = d.pop("l1", UNSET)

        fit_intercept = d.pop("fit_intercept", UNSET)

        cauchy_scale = d.pop("cauchy_scale", UNSET)

        cauchy_regression_spec = cls(
            type_=type_,
            label_bound=label_bound,
            l2=l2,
            l1=l1,
            fit_intercept=fit_intercept,
            cauchy_scale=cauchy_scale,
        )

        return cauchy_regression_spec
