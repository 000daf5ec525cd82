from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="SigmoidClassifierSpec")


@_attrs_define
class SigmoidClassifierSpec:
    """Linear classifier with the (non-convex) sigmoid loss σ(−y w·x).

    Attributes:
        type_ (Literal['sigmoid_classifier']): Model family: linear classifier with the bounded, non-convex sigmoid loss
            1/(1 + exp(y w·x)); L = 1/4, β = 1/(6√3). Needs an optimizer for non-convex objectives.
        l2 (float | Unset): L2 regularisation μ of the objective (1/n) Σ ℓ(w; x_i, y_i) + (μ/2)‖w‖² + l1‖w‖₁ (per-row-
            averaged; scikit-learn's C equals 1/(n·μ)). μ > 0 makes the objective strongly convex (for a convex loss), which
            bounds the sensitivity independently of the iteration count. Default: 0.0001.
        l1 (float | Unset): L1 regularisation weight of the term l1‖w‖₁ (elastic net together with l2). Non-smooth: only
            proximal optimizers (dp_svrg) accept l1 > 0; the others reject the job. Default: 0.0.
        fit_intercept (bool | Unset): Append a constant feature for the intercept. It lies inside the row-norm bound
            ‖x‖₂ ≤ 1 and is regularised (l2 and l1) like the other coefficients. Default: True.
    """

    type_: Literal["sigmoid_classifier"]
    l2: float | Unset = 0.0001
    l1: float | Unset = 0.0
    fit_intercept: bool | Unset = True

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        l2 = self.l2

        l1 = self.l1

        fit_intercept = self.fit_intercept

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
            }
        )
        if l2 is not UNSET:
            field_dict["l2"] = l2
        if l1 is not UNSET:
            field_dict["l1"] = l1
        if fit_intercept is not UNSET:
            field_dict["fit_intercept"] = fit_intercept

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["sigmoid_classifier"], d.pop("type"))
        if type_ != "sigmoid_classifier":
            raise ValueError(f"type must match const 'sigmoid_classifier', got '{type_}'")

        l2 = d.pop("l2", UNSET)

        l1 = d.pop("l1", UNSET)

        fit_intercept = d.pop("fit_intercept", UNSET)

        sigmoid_classifier_spec = cls(
            type_=type_,
            l2=l2,
            l1=l1,
            fit_intercept=fit_intercept,
        )

        return sigmoid_classifier_spec
