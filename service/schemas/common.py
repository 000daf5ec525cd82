"""What every HTTP schema shares: strict request bodies, roles, statuses and the ε/δ floors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from service import safe_text
from service.db import job_status

Role = Literal["admin", "owner", "analyst"]
JobStatus = job_status.JobStatus


# Smallest accepted ε and smallest positive δ (jobs and budgets): below them the calibrations
# under/overflow (ε = 5e-324 made `math.log` fail, or a pure-DP noise scale infinite). Every
# optimizer's plan is checked at these bounds in tests/api/test_input_hygiene.py.
MIN_EPSILON = 1e-6
MIN_POSITIVE_DELTA = 1e-100


class Strict(BaseModel):
    """A request body (or part of one), validated at the HTTP edge.

    - unknown fields are refused (``extra="forbid"``);
    - JSON types are taken as sent (``strict=True``): ``true`` or ``"0.5"`` is not a number,
      ``1.0`` is not an integer; a JSON integer is a valid float;
    - no string anywhere inside (values and object keys, at any depth) holds a control
      character or a lone surrogate (service/safe_text.py), reported at its own field.

    Fields whose type is a model defined elsewhere (label, features, the model spec) are
    declared with :func:`strictly` so that they are validated strictly too.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _safe_text(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        path = safe_text.first_unsafe_path(data) if isinstance(data, dict) else None
        if path is not None:
            error = InitErrorDetails(
                type=PydanticCustomError("control_character", safe_text.MESSAGE),
                loc=path,
                input="",  # never echo the offending value
            )
            raise ValidationError.from_exception_data(cls.__name__, [error])
        return handler(data)


def strictly(kind: Any) -> BeforeValidator:
    """Validate a field of type ``kind`` (a model defined outside this module) strictly, as
    :class:`Strict` validates its own fields; errors keep their field paths."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return BeforeValidator(lambda value: adapter.validate_python(value, strict=True))


def zero_or_large_enough(value: float, info: ValidationInfo) -> float:
    if 0 < value < MIN_POSITIVE_DELTA:
        raise ValueError(f"must be 0 or at least {MIN_POSITIVE_DELTA:g}")
    return value


class PrivacyOut(BaseModel):
    """An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
    looser rules are still shown."""

    epsilon: float
    delta: float
