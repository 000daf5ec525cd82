from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.evaluation_create import EvaluationCreate
from ...models.job_estimate_out import JobEstimateOut
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    model_id: str,
    *,
    body: EvaluationCreate,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/models/{model_id}/evaluate/estimate".format(
            model_id=quote(str(model_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> JobEstimateOut | Problem | None:
    if response.status_code == 200:
        response_200 = JobEstimateOut.from_dict(response.json())

        return response_200

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
) -> Response[JobEstimateOut | Problem]:
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
) -> Response[JobEstimateOut | Problem]:
    """Price a private evaluation without submitting it

     Plan and price the body of `POST /v1/models/{id}/evaluate` exactly as a submission
    would; charges nothing, writes nothing.

    Args:
        model_id (str):
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobEstimateOut | Problem]
    """

    kwargs = _get_kwargs(
        model_id=model_id,
        body=body,
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
) -> JobEstimateOut | Problem | None:
    """Price a private evaluation without submitting it

     Plan and price the body of `POST /v1/models/{id}/evaluate` exactly as a submission
    would; charges nothing, writes nothing.

    Args:
        model_id (str):
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobEstimateOut | Problem
    """

    return sync_detailed(
        model_id=model_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
) -> Response[JobEstimateOut | Problem]:
    """Price a private evaluation without submitting it

     Plan and price the body of `POST /v1/models/{id}/evaluate` exactly as a submission
    would; charges nothing, writes nothing.

    Args:
        model_id (str):
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobEstimateOut | Problem]
    """

    kwargs = _get_kwargs(
        model_id=model_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    model_id: str,
    *,
    client: AuthenticatedClient,
    body: EvaluationCreate,
) -> JobEstimateOut | Problem | None:
    """Price a private evaluation without submitting it

     Plan and price the body of `POST /v1/models/{id}/evaluate` exactly as a submission
    would; charges nothing, writes nothing.

    Args:
        model_id (str):
        body (EvaluationCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobEstimateOut | Problem
    """

    return (
        await asyncio_detailed(
            model_id=model_id,
            client=client,
            body=body,
        )
    ).parsed
