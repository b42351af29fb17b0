"""EC2's errors in elb's words (pure): which codes mean no capacity, a permission denied, the
request rate or a passing fault, and any botocore exception as a :class:`CloudError` with plain
words, ``retryable`` and ``throttled`` set.

Throttling is retried by botocore's ``standard`` retry mode before any of this sees it; a
permission error names the missing permission, and is never retried.
"""

from __future__ import annotations

import re

from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from elb.core.interfaces import CloudError

# Error codes that mean "no room for this choice now": try the next type / subnet.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "Unsupported",  # e.g. instance type not supported in the subnet's AZ
        "InsufficientFreeAddressesInSubnet",
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",
    }
)

# Authentication and permission errors: never retried, the message names the permission.
AUTH_CODES = frozenset(
    {
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "RequestExpired",
        "OptInRequired",
        "Blocked",
    }
)

# The account's API request rate: no fault of what was asked for (``CloudError.throttled``).
THROTTLE_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})

# Still failing after botocore's own retries; trying again on a later pass may help.
TRANSIENT_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
    }
)

_PERMISSION = re.compile(r"perform:\s*([A-Za-z0-9-]+:[A-Za-z0-9*]+)")


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", "Unknown"))


def error_message(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Message", ""))


def missing_permission(message: str, operation: str) -> str:
    """The IAM action an access-denied message names, else ``ec2:<operation>``."""
    m = _PERMISSION.search(message)
    if m:
        return m.group(1)
    return f"ec2:{operation}" if operation else "an EC2 permission"


def to_cloud_error(err: Exception, doing: str) -> CloudError:
    """Turn a botocore exception into a :class:`CloudError` with plain words and ``retryable`` set."""
    if isinstance(err, ClientError):
        code, msg = error_code(err), error_message(err)
        op = str(getattr(err, "operation_name", "") or "")
        if code in AUTH_CODES:
            perm = missing_permission(msg, op)
            return CloudError(
                f"{doing}: permission denied ({code}): elb's AWS identity needs {perm}; "
                f"see elb iam-policy. AWS said: {msg.split(' Encoded authorization')[0]}",
                retryable=False,
            )
        if code in TRANSIENT_CODES:
            return CloudError(f"{doing}: {code} after retries: {msg}", retryable=True, throttled=code in THROTTLE_CODES)
        return CloudError(f"{doing}: {code}: {msg}", retryable=False)
    if isinstance(err, NoCredentialsError):
        return CloudError(
            f"{doing}: no AWS credentials found (environment, ~/.aws, or the instance profile)",
            retryable=False,
        )
    if isinstance(err, NoRegionError):
        return CloudError(f"{doing}: no AWS region: set cloud.ec2.region or AWS_DEFAULT_REGION", retryable=False)
    # Connection failures and time-outs may pass; anything else (bad parameters, broken
    # credentials files) will not.
    transient = isinstance(err, BotoConnectionError | HTTPClientError)
    return CloudError(f"{doing}: {type(err).__name__}: {err}", retryable=transient)
