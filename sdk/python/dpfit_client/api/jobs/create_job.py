from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.job_create import JobCreate
from ...models.job_out import JobOut
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: JobCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> JobOut | Problem | None:
    if response.status_code == 202:
        response_202 = JobOut.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[JobOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: JobCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[JobOut | Problem]:
    """Submit a training job

     Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.

    Args:
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (JobCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: JobCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> JobOut | Problem | None:
    """Submit a training job

     Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.

    Args:
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (JobCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobOut | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: JobCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[JobOut | Problem]:
    """Submit a training job

     Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.

    Args:
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (JobCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: JobCreate,
    idempotency_key: None | str | Unset = UNSET,
) -> JobOut | Problem | None:
    """Submit a training job

     Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.

    Args:
        idempotency_key (None | str | Unset): Retrying with the same key and the same body answers
            the first job (`Idempotent-Replayed: true`) and charges once; with another body it is a
            422. 1–200 visible ASCII characters (no spaces).
        body (JobCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobOut | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
