"""Contains all the data models used in inputs/outputs"""

from .budget_history_out import BudgetHistoryOut
from .budget_history_point import BudgetHistoryPoint
from .budget_history_point_kind import BudgetHistoryPointKind
from .budget_out import BudgetOut
from .categorical_feature import CategoricalFeature
from .cauchy_regression_spec import CauchyRegressionSpec
from .charge_out import ChargeOut
from .charge_out_event import ChargeOutEvent
from .charge_out_kind import ChargeOutKind
from .dataset_create import DatasetCreate
from .dataset_create_execution import DatasetCreateExecution
from .dataset_out import DatasetOut
from .dataset_out_execution import DatasetOutExecution
from .dataset_source import DatasetSource
from .dataset_source_format_type_0 import DatasetSourceFormatType0
from .dataset_source_out import DatasetSourceOut
from .dataset_source_out_format import DatasetSourceOutFormat
from .dataset_validation_out import DatasetValidationOut
from .dataset_withdrawal_out import DatasetWithdrawalOut
from .evaluation_create import EvaluationCreate
from .evaluation_out import EvaluationOut
from .evaluation_out_metrics_type_0 import EvaluationOutMetricsType0
from .evaluation_out_plan import EvaluationOutPlan
from .evaluation_out_status import EvaluationOutStatus
from .feature_validation import FeatureValidation
from .field_problem import FieldProblem
from .grant_create import GrantCreate
from .grant_list_item import GrantListItem
from .grant_out import GrantOut
from .grant_revoked_out import GrantRevokedOut
from .health import Health
from .huber_regression_spec import HuberRegressionSpec
from .huber_svm_spec import HuberSVMSpec
from .job_create import JobCreate
from .job_estimate_out import JobEstimateOut
from .job_estimate_out_accounting import JobEstimateOutAccounting
from .job_estimate_out_plan import JobEstimateOutPlan
from .job_out import JobOut
from .job_out_model import JobOutModel
from .job_out_plan import JobOutPlan
from .job_out_status import JobOutStatus
from .job_privacy import JobPrivacy
from .key_create import KeyCreate
from .key_create_role import KeyCreateRole
from .key_created import KeyCreated
from .key_created_role import KeyCreatedRole
from .key_out import KeyOut
from .key_out_role import KeyOutRole
from .label_spec import LabelSpec
from .label_spec_type import LabelSpecType
from .label_validation import LabelValidation
from .ledger_out import LedgerOut
from .list_jobs_status_type_0 import ListJobsStatusType0
from .logistic_regression_spec import LogisticRegressionSpec
from .model_out import ModelOut
from .model_out_encoding import ModelOutEncoding
from .model_out_model import ModelOutModel
from .model_privacy import ModelPrivacy
from .multinomial_logistic_spec import MultinomialLogisticSpec
from .numeric_feature import NumericFeature
from .optimizer_choice import OptimizerChoice
from .optimizer_choice_params import OptimizerChoiceParams
from .optimizer_info import OptimizerInfo
from .optimizer_info_params import OptimizerInfoParams
from .predict_request import PredictRequest
from .predict_request_rows_item import PredictRequestRowsItem
from .predict_response import PredictResponse
from .prediction_warning_out import PredictionWarningOut
from .prediction_warning_out_kind import PredictionWarningOutKind
from .privacy_budget import PrivacyBudget
from .privacy_out import PrivacyOut
from .problem import Problem
from .progress import Progress
from .registration_refusal_out import RegistrationRefusalOut
from .sigmoid_classifier_spec import SigmoidClassifierSpec
from .validation_out import ValidationOut
from .who_am_i import WhoAmI
from .who_am_i_role import WhoAmIRole

__all__ = (
    "BudgetHistoryOut",
    "BudgetHistoryPoint",
    "BudgetHistoryPointKind",
    "BudgetOut",
    "CategoricalFeature",
    "CauchyRegressionSpec",
    "ChargeOut",
    "ChargeOutEvent",
    "ChargeOutKind",
    "DatasetCreate",
    "DatasetCreateExecution",
    "DatasetOut",
    "DatasetOutExecution",
    "DatasetSource",
    "DatasetSourceFormatType0",
    "DatasetSourceOut",
    "DatasetSourceOutFormat",
    "DatasetValidationOut",
    "DatasetWithdrawalOut",
    "EvaluationCreate",
    "EvaluationOut",
    "EvaluationOutMetricsType0",
    "EvaluationOutPlan",
    "EvaluationOutStatus",
    "FeatureValidation",
    "FieldProblem",
    "GrantCreate",
    "GrantListItem",
    "GrantOut",
    "GrantRevokedOut",
    "Health",
    "HuberRegressionSpec",
    "HuberSVMSpec",
    "JobCreate",
    "JobEstimateOut",
    "JobEstimateOutAccounting",
    "JobEstimateOutPlan",
    "JobOut",
    "JobOutModel",
    "JobOutPlan",
    "JobOutStatus",
    "JobPrivacy",
    "KeyCreate",
    "KeyCreated",
    "KeyCreatedRole",
    "KeyCreateRole",
    "KeyOut",
    "KeyOutRole",
    "LabelSpec",
    "LabelSpecType",
    "LabelValidation",
    "LedgerOut",
    "ListJobsStatusType0",
    "LogisticRegressionSpec",
    "ModelOut",
    "ModelOutEncoding",
    "ModelOutModel",
    "ModelPrivacy",
    "MultinomialLogisticSpec",
    "NumericFeature",
    "OptimizerChoice",
    "OptimizerChoiceParams",
    "OptimizerInfo",
    "OptimizerInfoParams",
    "PredictionWarningOut",
    "PredictionWarningOutKind",
    "PredictRequest",
    "PredictRequestRowsItem",
    "PredictResponse",
    "PrivacyBudget",
    "PrivacyOut",
    "Problem",
    "Progress",
    "RegistrationRefusalOut",
    "SigmoidClassifierSpec",
    "ValidationOut",
    "WhoAmI",
    "WhoAmIRole",
)
