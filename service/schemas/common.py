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
      character or a lone surrogate (service/safe_text.py), reported at its own field;
    - free-form values (a prediction row's cells, an optimizer's ``params``) have the shape
      their model states (:meth:`free_form_problem`), and nothing inside is nested more than
      :data:`MAX_NESTING` arrays/objects deep: checked first, without recursion, so that no
      recursive code after it (the text check, serialisation, pickling to a compute process)
      meets a value deep enough to fail with a 500.

    Fields whose type is a model defined elsewhere (label, features, the model spec) are
    declared with :func:`strictly` so that they are validated strictly too.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _safe_text(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if isinstance(data, dict):
            found = cls.free_form_problem(data) or nested_too_deep(data, MAX_NESTING)
            if found is None:
                path = safe_text.first_unsafe_path(data)
                found = None if path is None else (path, "control_character", safe_text.MESSAGE)
            if found is not None:
                path, kind, message = found
                error = InitErrorDetails(
                    type=PydanticCustomError(kind, message),
                    loc=path,
                    input="",  # never echo the offending value
                )
                raise ValidationError.from_exception_data(cls.__name__, [error])
        return handler(data)

    @classmethod
    def free_form_problem(cls, data: dict[str, Any]) -> FreeFormProblem | None:
        """The first value of ``data`` (the raw body of this model) whose free-form content
        breaks its own rule, as (location, error type, message); None when all keep them. A
        model with free-form fields overrides it (a bounded walk, never recursive)."""
        return None


#: (location in the body, error type, message) of a refusal found before validation.
FreeFormProblem = tuple[tuple[str | int, ...], str, str]

#: The deepest a request body may nest arrays and objects: 4 levels for a dataset's features,
#: 6 for private_selection's candidates' own parameters. Far below where recursive code fails.
MAX_NESTING = 32


def nested_too_deep(value: Any, limit: int) -> FreeFormProblem | None:
    """The location of an array or object nested more than ``limit`` levels below ``value``
    (the first in document order), or None. Iterative and bounded by the limit: a cost linear in
    the size of the value whatever its depth; locations are built only for a refusal."""
    if not _deeper_than(value, limit):
        return None
    message = f"nested too deeply: a request body holds at most {limit} levels of arrays and "
    return _first_too_deep(value, limit), "too_deep", message + "objects"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether an array or object lies more than ``limit`` levels below ``value`` (one pass)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _first_too_deep(value: Any, limit: int) -> tuple[str | int, ...]:
    """The location of the first array or object more than ``limit`` levels below ``value``
    (one exists: :func:`_deeper_than`)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if len(path) > limit:
            return path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        children = [((*path, k), c) for k, c in items if isinstance(c, dict | list)]
        stack.extend(reversed(children))
    return ()


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
