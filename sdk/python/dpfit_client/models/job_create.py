from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.cauchy_regression_spec import CauchyRegressionSpec
    from ..models.huber_regression_spec import HuberRegressionSpec
    from ..models.huber_svm_spec import HuberSVMSpec
    from ..models.job_privacy import JobPrivacy
    from ..models.logistic_regression_spec import LogisticRegressionSpec
    from ..models.multinomial_logistic_spec import MultinomialLogisticSpec
    from ..models.optimizer_choice import OptimizerChoice
    from ..models.sigmoid_classifier_spec import SigmoidClassifierSpec


T = TypeVar("T", bound="JobCreate")


@_attrs_define
class JobCreate:
    """
    Attributes:
        dataset_id (str):
        model (CauchyRegressionSpec | HuberRegressionSpec | HuberSVMSpec | LogisticRegressionSpec |
            MultinomialLogisticSpec | SigmoidClassifierSpec):
        privacy (JobPrivacy):
        optimizer (OptimizerChoice | Unset):
    """

    dataset_id: str
    model: (
        CauchyRegressionSpec
        | HuberRegressionSpec
        | HuberSVMSpec
        | LogisticRegressionSpec
        | MultinomialLogisticSpec
        | SigmoidClassifierSpec
    )
    privacy: JobPrivacy
    optimizer: OptimizerChoice | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.cauchy_regression_spec import CauchyRegressionSpec  # noqa: PLC0415
        from ..models.huber_regression_spec import HuberRegressionSpec  # noqa: PLC0415
        from ..models.huber_svm_spec import HuberSVMSpec  # noqa: PLC0415
        from ..models.logistic_regression_spec import LogisticRegressionSpec  # noqa: PLC0415
        from ..models.multinomial_logistic_spec import MultinomialLogisticSpec  # noqa: PLC0415

        dataset_id = self.dataset_id

        model: dict[str, Any]
        if isinstance(self.model, CauchyRegressionSpec):
            model = self.model.to_dict()
        elif isinstance(self.model, HuberRegressionSpec):
            model = self.model.to_dict()
        elif isinstance(self.model, HuberSVMSpec):
            model = self.model.to_dict()
        elif isinstance(self.model, LogisticRegressionSpec):
            model = self.model.to_dict()
        elif isinstance(self.model, MultinomialLogisticSpec):
            model = self.model.to_dict()
        else:
            model = self.model.to_dict()

        privacy = self.privacy.to_dict()

        optimizer: dict[str, Any] | Unset = UNSET
        if not isinstance(self.optimizer, Unset):
            optimizer = self.optimizer.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "dataset_id": dataset_id,
                "model": model,
                "privacy": privacy,
            }
        )
        if optimizer is not UNSET:
            field_dict["optimizer"] = optimizer

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.cauchy_regression_spec import CauchyRegressionSpec  # noqa: PLC0415
        from ..models.huber_regression_spec import HuberRegressionSpec  # noqa: PLC0415
        from ..models.huber_svm_spec import HuberSVMSpec  # noqa: PLC0415
        from ..models.job_privacy import JobPrivacy  # noqa: PLC0415
        from ..models.logistic_regression_spec import LogisticRegressionSpec  # noqa: PLC0415
        from ..models.multinomial_logistic_spec import MultinomialLogisticSpec  # noqa: PLC0415
        from ..models.optimizer_choice import OptimizerChoice  # noqa: PLC0415
        from ..models.sigmoid_classifier_spec import SigmoidClassifierSpec  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        def _parse_model(
            data: object,
        ) -> (
            CauchyRegressionSpec
            | HuberRegressionSpec
            | HuberSVMSpec
            | LogisticRegressionSpec
            | MultinomialLogisticSpec
            | SigmoidClassifierSpec
        ):
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_0 = CauchyRegressionSpec.from_dict(data)

                return model_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_1 = HuberRegressionSpec.from_dict(data)

                return model_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_2 = HuberSVMSpec.from_dict(data)

                return model_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_3 = LogisticRegressionSpec.from_dict(data)

                return model_type_3
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_4 = MultinomialLogisticSpec.from_dict(data)

                return model_type_4
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            model_type_5 = SigmoidClassifierSpec.from_dict(data)

            return model_type_5

        model = _parse_model(d.pop("model"))

        privacy = JobPrivacy.from_dict(d.pop("privacy"))

        _optimizer = d.pop("optimizer", UNSET)
        optimizer: OptimizerChoice | Unset
        if isinstance(_optimizer, Unset):
            optimizer = UNSET
        else:
            optimizer = OptimizerChoice.from_dict(_optimizer)

        job_create = cls(
            dataset_id=dataset_id,
            model=model,
            privacy=privacy,
            optimizer=optimizer,
        )

        return job_create
