from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.evaluation_create import EvaluationCreate
from ...models.evaluation_out import EvaluationOut
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    model_id: str,
    *,
    body: EvaluationCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/models/{model_id}/evaluate".format(
            model_id=quote(str(model_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> EvaluationOut | Problem | None:
    if response.status_code == 202:
        response_202 = EvaluationOut.from_dict(response.json())

        return response_202

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[EvaluationOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[EvaluationOut | Problem]:
    """Evaluate a model privately on a dataset

     Noised accuracy, log-loss (squared error for regression) and, for binary labels, a noised
    confusion matrix of the model on a dataset you are granted (same schema as the model's).

    An evaluation is a job: charged on that dataset's ledger when accepted (202, status
    ``queued``), run by a worker; poll `GET /v1/models/{id}/evaluations/{evaluation_id}`.

    Args:
        model_id (str):
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EvaluationOut | Problem]
    """

    kwargs = _get_kwargs(
        model_id=model_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> EvaluationOut | Problem | None:
    """Evaluate a model privately on a dataset

     Noised accuracy, log-loss (squared error for regression) and, for binary labels, a noised
    confusion matrix of the model on a dataset you are granted (same schema as the model's).

    An evaluation is a job: charged on that dataset's ledger when accepted (202, status
    ``queued``), run by a worker; poll `GET /v1/models/{id}/evaluations/{evaluation_id}`.

    Args:
        model_id (str):
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EvaluationOut | Problem
    """

    return sync_detailed(
        model_id=model_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[EvaluationOut | Problem]:
    """Evaluate a model privately on a dataset

     Noised accuracy, log-loss (squared error for regression) and, for binary labels, a noised
    confusion matrix of the model on a dataset you are granted (same schema as the model's).

    An evaluation is a job: charged on that dataset's ledger when accepted (202, status
    ``queued``), run by a worker; poll `GET /v1/models/{id}/evaluations/{evaluation_id}`.

    Args:
        model_id (str):
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EvaluationOut | Problem]
    """

    kwargs = _get_kwargs(
        model_id=model_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> EvaluationOut | Problem | None:
    """Evaluate a model privately on a dataset

     Noised accuracy, log-loss (squared error for regression) and, for binary labels, a noised
    confusion matrix of the model on a dataset you are granted (same schema as the model's).

    An evaluation is a job: charged on that dataset's ledger when accepted (202, status
    ``queued``), run by a worker; poll `GET /v1/models/{id}/evaluations/{evaluation_id}`.

    Args:
        model_id (str):
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EvaluationOut | Problem
    """

    return (
        await asyncio_detailed(
            model_id=model_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
