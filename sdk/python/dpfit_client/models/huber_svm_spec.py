from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="HuberSVMSpec")


@_attrs_define
class HuberSVMSpec:
    """Linear SVM with the Huber-smoothed hinge loss (labels mapped to −1/+1).

    Attributes:
        type_ (Literal['huber_svm']): Model family: linear SVM with the Huber (smoothed) hinge loss of Chaudhuri,
            Monteleoni & Sarwate (2011); L = 1, β = 1/(2·huber_width), convex.
        l2 (float | Unset): L2 regularisation μ of the objective (1/n) Σ ℓ(w; x_i, y_i) + (μ/2)‖w‖² + l1‖w‖₁ (per-row-
            averaged; scikit-learn's C equals 1/(n·μ)). μ > 0 makes the objective strongly convex (for a convex loss), which
            bounds the sensitivity independently of the iteration count. Default: 0.0001.
        l1 (float | Unset): L1 regularisation weight of the term l1‖w‖₁ (elastic net together with l2). Non-smooth: only
            proximal optimizers (dp_svrg) accept l1 > 0; the others reject the job. Default: 0.0.
        fit_intercept (bool | Unset): Append a constant feature for the intercept. It lies inside the row-norm bound
            ‖x‖₂ ≤ 1 and is regularised (l2 and l1) like the other coefficients. Default: True.
        huber_width (float | Unset): h: the hinge is replaced by a quadratic on margins within h of 1. Smaller h is
            closer to the hinge but less smooth (β = 1/(2h)), which forces smaller steps. Default: 0.5.
    """

    type_: Literal["huber_svm"]
    l2: float | Unset = 0.0001
    l1: float | Unset = 0.0
    fit_intercept: bool | Unset = True
    huber_width: float | Unset = 0.5

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        l2 = self.l2

        l1 = self.l1

        fit_intercept = self.fit_intercept

        huber_width = self.huber_width

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
        if huber_width is not UNSET:
            field_dict["huber_width"] = huber_width

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["huber_svm"], d.pop("type"))
        if type_ != "huber_svm":
            raise ValueError(f"type must match const 'huber_svm', got '{type_}'")

        l2 = d.pop("l2", UNSET)

        l1 = d.pop("l1", UNSET)

        fit_intercept = d.pop("fit_intercept", UNSET)

        huber_width = d.pop("huber_width", UNSET)

        huber_svm_spec = cls(
            type_=type_,
            l2=l2,
            l1=l1,
            fit_intercept=fit_intercept,
            huber_width=huber_width,
        )

        return huber_svm_spec
