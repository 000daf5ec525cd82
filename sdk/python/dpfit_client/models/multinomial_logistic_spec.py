from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="MultinomialLogisticSpec")


@_attrs_define
class MultinomialLogisticSpec:
    """Multinomial (softmax) logistic regression over a categorical label's declared classes.

    Attributes:
        type_ (Literal['multinomial_logistic_regression']): Model family: multinomial (softmax) logistic regression over
            the categorical label's K declared classes, fitted jointly (K weight rows, one release): cross-entropy loss, L =
            √2 and β = 1/2 whatever K, so its noise does not grow with the number of classes as one-vs-rest's does.
            Categorical labels only.
        l2 (float | Unset): L2 regularisation μ of the objective (1/n) Σ ℓ(w; x_i, y_i) + (μ/2)‖w‖² + l1‖w‖₁ (per-row-
            averaged; scikit-learn's C equals 1/(n·μ)). μ > 0 makes the objective strongly convex (for a convex loss), which
            bounds the sensitivity independently of the iteration count. Default: 0.0001.
        l1 (float | Unset): L1 regularisation weight of the term l1‖w‖₁ (elastic net together with l2). Non-smooth: only
            proximal optimizers (dp_svrg) accept l1 > 0; the others reject the job. Default: 0.0.
        fit_intercept (bool | Unset): Append a constant feature for the intercept. It lies inside the row-norm bound
            ‖x‖₂ ≤ 1 and is regularised (l2 and l1) like the other coefficients. Default: True.
        gradient_clip (float | None | Unset): C in (0, 1]: the binary model's clipped slope applied to each row's soft-
            min margin z_y − logsumexp_{k≠y} z_k (a convex loss: the cross-entropy where the margin is above log((1 − C)/C),
            its tangent below). Lipschitz constant √2·C (√2 without clipping), so the noise scales by C; smoothness 2c(1 −
            c) + C/2, c = min(C, 1/2). Probabilities are then scores whose argmax is calibrated. Default: no clipping.
        gradient_norm_clip (float | None | Unset): B in [1e-6, 1e6]: each row's gradient is scaled to norm at most B
            (per-example clipping, as DP-SGD; its coefficient vector ∂ℓ/∂z is scaled, and rows have norm ≤ 1), so the
            Lipschitz constant, and the noise, become min(B, √2·C). Below √2·C the steps follow a clipped field that is no
            loss's gradient: only dp_gd, dp_agd and dp_agd_averaged accept it. auto sets C·√(K/(K − 1)) for K ≥ 3 classes
            (the norm every row has at w = 0). Default: none.
    """

    type_: Literal["multinomial_logistic_regression"]
    l2: float | Unset = 0.0001
    l1: float | Unset = 0.0
    fit_intercept: bool | Unset = True
    gradient_clip: float | None | Unset = UNSET
    gradient_norm_clip: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        type_ = self.type_

        l2 = self.l2

        l1 = self.l1

        fit_intercept = self.fit_intercept

        gradient_clip: float | None | Unset
        if isinstance(self.gradient_clip, Unset):
            gradient_clip = UNSET
        else:
            gradient_clip = self.gradient_clip

        gradient_norm_clip: float | None | Unset
        if isinstance(self.gradient_norm_clip, Unset):
            gradient_norm_clip = UNSET
        else:
            gradient_norm_clip = self.gradient_norm_clip

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
        if gradient_clip is not UNSET:
            field_dict["gradient_clip"] = gradient_clip
        if gradient_norm_clip is not UNSET:
            field_dict["gradient_norm_clip"] = gradient_norm_clip

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        type_ = cast(Literal["multinomial_logistic_regression"], d.pop("type"))
        if type_ != "multinomial_logistic_regression":
            raise ValueError(f"type must match const 'multinomial_logistic_regression', got '{type_}'")

        l2 = d.pop("l2", UNSET)

        l1 = d.pop("l1", UNSET)

        fit_intercept = d.pop("fit_intercept", UNSET)

        def _parse_gradient_clip(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        gradient_clip = _parse_gradient_clip(d.pop("gradient_clip", UNSET))

        def _parse_gradient_norm_clip(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        gradient_norm_clip = _parse_gradient_norm_clip(d.pop("gradient_norm_clip", UNSET))

        multinomial_logistic_spec = cls(
            type_=type_,
            l2=l2,
            l1=l1,
            fit_intercept=fit_intercept,
            gradient_clip=gradient_clip,
            gradient_norm_clip=gradient_norm_clip,
        )

        return multinomial_logistic_spec
