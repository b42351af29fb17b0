"""``elb init``'s words about the metadata service: an HTTP error is an answer (say what it
answered, to which request), a silence is not (say it did not answer, and how)."""

from __future__ import annotations

import email.message
import urllib.error
from pathlib import Path

import pytest

from elb.cli import init


def problem(tmp_path: Path, err: Exception) -> str:
    def fetch(method: str, url: str, headers: dict[str, str]) -> str:
        raise err

    ec2, said = init.read_ec2(offline=False, fetch=fetch)
    assert ec2 is None and said is not None
    return said


def test_an_http_error_is_an_answer_and_says_what_it_answered(tmp_path: Path) -> None:
    url = f"{init.IMDS}/latest/api/token"
    err = urllib.error.HTTPError(url, 404, "Not Found", email.message.Message(), None)
    said = problem(tmp_path, err)
    assert "did not answer" not in said and "HTTPError" not in said
    assert "answered HTTP 404 Not Found to PUT /latest/api/token" in said


@pytest.mark.parametrize(
    ("err", "says"),
    [
        (
            urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
            "did not answer (Connection refused)",
        ),
        (TimeoutError("timed out"), f"did not answer within {init.IMDS_TIMEOUT:g} s"),
        (urllib.error.URLError(TimeoutError("timed out")), f"did not answer within {init.IMDS_TIMEOUT:g} s"),
        (ValueError("Expecting value"), "answered with a document that is not EC2's instance identity"),
        (KeyError("region"), "answered with a document that is not EC2's instance identity (no 'region')"),
    ],
)
def test_the_other_ways_it_fails_say_what_happened(tmp_path: Path, err: Exception, says: str) -> None:
    said = problem(tmp_path, err)
    assert says in said and "\n" not in said
