from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.grant_revoked_out import GrantRevokedOut
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    dataset_id: str,
    grantee: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/datasets/{dataset_id}/grants/{grantee}/revoke".format(
            dataset_id=quote(str(dataset_id), safe=""),
            grantee=quote(str(grantee), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> GrantRevokedOut | Problem | None:
    if response.status_code == 200:
        response_200 = GrantRevokedOut.from_dict(response.json())

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[GrantRevokedOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    dataset_id: str,
    grantee: str,
    *,
    client: AuthenticatedClient,
) -> Response[GrantRevokedOut | Problem]:
    """Revoke a grant

     Revoke ``grantee``'s grant (the dataset's owner and admins; analysts 403, other owners 404).

    Revocation stops NEW jobs: the grantee's next submission, estimate or read of the dataset
    answers 404. It changes no accounting: the ledger is append-only, so the grantee's charges
    stay; its queued and running jobs keep running and keep their charge (cancelling one that no
    worker has read is refunded as always), and it still sees its own jobs and models. Granting
    again later is a new grant; earlier charges count against its cap. A submission whose access
    check ran just before the revocation committed may still be admitted (service/domain/grants.py).
    No such grant → 404 (a second revocation too).

    Args:
        dataset_id (str):
        grantee (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GrantRevokedOut | Problem]
    """

    kwargs = _get_kwargs(
        dataset_id=dataset_id,
        grantee=grantee,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    dataset_id: str,
    grantee: str,
    *,
    client: AuthenticatedClient,
) -> GrantRevokedOut | Problem | None:
    """Revoke a grant

     Revoke ``grantee``'s grant (the dataset's owner and admins; analysts 403, other owners 404).

    Revocation stops NEW jobs: the grantee's next submission, estimate or read of the dataset
    answers 404. It changes no accounting: the ledger is append-only, so the grantee's charges
    stay; its queued and running jobs keep running and keep their charge (cancelling one that no
    worker has read is refunded as always), and it still sees its own jobs and models. Granting
    again later is a new grant; earlier charges count against its cap. A submission whose access
    check ran just before the revocation committed may still be admitted (service/domain/grants.py).
    No such grant → 404 (a second revocation too).

    Args:
        dataset_id (str):
        grantee (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GrantRevokedOut | Problem
    """

    return sync_detailed(
        dataset_id=dataset_id,
        grantee=grantee,
        client=client,
    ).parsed


async def asyncio_detailed(
    dataset_id: str,
    grantee: str,
    *,
    client: AuthenticatedClient,
) -> Response[GrantRevokedOut | Problem]:
    """Revoke a grant

     Revoke ``grantee``'s grant (the dataset's owner and admins; analysts 403, other owners 404).

    Revocation stops NEW jobs: the grantee's next submission, estimate or read of the dataset
    answers 404. It changes no accounting: the ledger is append-only, so the grantee's charges
    stay; its queued and running jobs keep running and keep their charge (cancelling one that no
    worker has read is refunded as always), and it still sees its own jobs and models. Granting
    again later is a new grant; earlier charges count against its cap. A submission whose access
    check ran just before the revocation committed may still be admitted (service/domain/grants.py).
    No such grant → 404 (a second revocation too).

    Args:
        dataset_id (str):
        grantee (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GrantRevokedOut | Problem]
    """

    kwargs = _get_kwargs(
        dataset_id=dataset_id,
        grantee=grantee,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    dataset_id: str,
    grantee: str,
    *,
    client: AuthenticatedClient,
) -> GrantRevokedOut | Problem | None:
    """Revoke a grant

     Revoke ``grantee``'s grant (the dataset's owner and admins; analysts 403, other owners 404).

    Revocation stops NEW jobs: the grantee's next submission, estimate or read of the dataset
    answers 404. It changes no accounting: the ledger is append-only, so the grantee's charges
    stay; its queued and running jobs keep running and keep their charge (cancelling one that no
    worker has read is refunded as always), and it still sees its own jobs and models. Granting
    again later is a new grant; earlier charges count against its cap. A submission whose access
    check ran just before the revocation committed may still be admitted (service/domain/grants.py).
    No such grant → 404 (a second revocation too).

    Args:
        dataset_id (str):
        grantee (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GrantRevokedOut | Problem
    """

    return (
        await asyncio_detailed(
            dataset_id=dataset_id,
            grantee=grantee,
            client=client,
        )
    ).parsed
