"""infra/local/s3_auth.py in process: requests signed by botocore (presigned and header-signed) reach
the app behind with their body intact; the rules S3 applies refuse the rest, to the second."""

from __future__ import annotations

import base64
import calendar
import hashlib
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from werkzeug.test import Client

from infra.local.s3_auth import S3Auth
from tests.support.moto_server import moto_client

ENDPOINT = "http://127.0.0.1:5000"
BODY = b"exactly these bytes"
CHECKSUM = base64.b64encode(hashlib.sha256(BODY).digest()).decode()


class Behind:
    """The app behind the check (moto's place): records what reached it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read()
        self.seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], body))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"stored"]


def checked(clock: float | None = None) -> tuple[Client, Behind]:
    behind = Behind()
    app = S3Auth(
        behind,
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        clock=(lambda: clock) if clock is not None else time.time,
    )
    return Client(app), behind


def presigned(expires: int = 900, **params: Any) -> str:
    s3 = moto_client(
        "s3",
        ENDPOINT,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    signed = {"Bucket": "b", "Key": "uploads/notes/dev/r ~é", "ContentLength": len(BODY), **params}
    return str(s3.generate_presigned_url("put_object", Params=signed, ExpiresIn=expires))


def put(client: Client, url: str, headers: dict[str, str], body: bytes = BODY) -> Any:
    parts = urlsplit(url)
    return client.put(parts.path, query_string=parts.query, headers={"Host": parts.netloc, **headers}, data=body)


def signed_at(url: str) -> float:
    stamp = next(p.split("=", 1)[1] for p in urlsplit(url).query.split("&") if p.startswith("X-Amz-Date="))
    return float(calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ")))


def code(response: Any) -> str:
    text = response.get_data(as_text=True)
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def test_a_presigned_put_as_signed_reaches_the_app_with_its_body() -> None:
    url = presigned(ContentType="text/markdown", ChecksumSHA256=CHECKSUM)
    client, behind = checked()
    headers = {"Content-Type": "text/markdown", "x-amz-checksum-sha256": CHECKSUM}
    response = put(client, url, headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    path = "/b/uploads/notes/dev/r ~é".encode().decode("latin-1")  # WSGI's PATH_INFO
    assert behind.seen == [("PUT", path, BODY)]


@pytest.mark.parametrize(
    ("headers", "body", "status", "expected"),
    [
        ({"Content-Type": "text/html", "x-amz-checksum-sha256": CHECKSUM}, BODY, 403, "SignatureDoesNotMatch"),
        ({"Content-Type": "text/markdown"}, BODY, 403, "SignatureDoesNotMatch"),
        ({"Content-Type": "text/markdown", "x-amz-checksum-sha256": CHECKSUM}, BODY[::-1], 400, "BadDigest"),
    ],
)
def test_a_presigned_put_otherwise_is_refused_and_never_reaches_the_app(
    headers: dict[str, str], body: bytes, status: int, expected: str
) -> None:
    url = presigned(ContentType="text/markdown", ChecksumSHA256=CHECKSUM)
    client, behind = checked()
    response = put(client, url, headers, body)
    assert (response.status_code, code(response)) == (status, expected)
    assert response.mimetype == "application/xml" and behind.seen == []


def test_a_checksum_that_is_no_sha256_is_an_invalid_request_even_when_signed() -> None:
    url = presigned(ChecksumSHA256="bm90IGEgZGlnZXN0")
    client, behind = checked()
    response = put(client, url, {"x-amz-checksum-sha256": "bm90IGEgZGlnZXN0"})
    assert (response.status_code, code(response)) == (400, "InvalidRequest") and behind.seen == []


def test_a_presigned_url_expires_at_its_date_plus_expires() -> None:
    url = presigned(expires=60)
    at = signed_at(url)
    on_time, _ = checked(clock=at + 60)
    assert put(on_time, url, {}).status_code == 200
    late, behind = checked(clock=at + 61)
    response = put(late, url, {})
    assert (response.status_code, code(response)) == (403, "AccessDenied")
    assert "<Message>Request has expired</Message>" in response.get_data(as_text=True)
    assert "<X-Amz-Expires>60</X-Amz-Expires>" in response.get_data(as_text=True) and behind.seen == []


def header_signed(service: str, body: bytes, secret: str = "testing") -> dict[str, str]:
    request = AWSRequest(method="PUT", url=f"{ENDPOINT}/b/k%20x?tagging", data=body)
    signer = S3SigV4Auth if service == "s3" else SigV4Auth
    signer(Credentials("testing", secret), service, "us-east-1").add_auth(request)
    return {"Host": urlsplit(ENDPOINT).netloc, **dict(request.headers.items())}


def test_header_signed_s3_requests_are_verified_and_others_pass() -> None:
    client, behind = checked()
    headers = header_signed("s3", BODY)
    assert client.put("/b/k%20x", query_string="tagging", headers=headers, data=BODY).status_code == 200
    # botocore signed the body's hash (x-amz-content-sha256), not its length: another body is that mismatch.
    for other_body in (BODY + b"!", BODY[::-1]):
        tampered = client.put("/b/k%20x", query_string="tagging", headers=headers, data=other_body)
        assert (tampered.status_code, code(tampered)) == (400, "XAmzContentSHA256Mismatch")
    stale = {**headers, "X-Amz-Date": "20200101T000000Z"}
    assert code(client.put("/b/k%20x", query_string="tagging", headers=stale, data=BODY)) == "RequestTimeTooSkewed"
    forged = header_signed("s3", BODY, secret="wrong")
    assert code(client.put("/b/k%20x", query_string="tagging", headers=forged, data=BODY)) == "SignatureDoesNotMatch"
    # The runtime's DynamoDB, SQS, KMS calls are not S3's to judge.
    other = header_signed("dynamodb", b"{}", secret="wrong")
    assert client.put("/b/k%20x", query_string="tagging", headers=other, data=b"{}").status_code == 200
    assert [body for _, _, body in behind.seen] == [BODY, b"{}"]


@pytest.mark.parametrize("service", ["S3", "S3-Object-Lambda", "sdb", "s3express"])
def test_a_scope_naming_s3_in_another_spelling_is_checked_not_passed(service: str) -> None:
    """moto routes a credential scope's service case-insensitively ("S3" reaches its S3), so anything
    but the runtime's own other services is S3's to check; S3 accepts only "s3". A forged signature
    under such a scope never reaches moto, for any verb."""
    client, behind = checked()
    forged = header_signed(service, BODY, secret="wrong")
    for method in ("GET", "PUT", "DELETE"):
        refused = client.open("/b/k%20x", method=method, query_string="tagging", headers=forged, data=BODY)
        assert refused.status_code in (400, 403), (method, refused.status_code)
    listing = client.get("/b", headers=forged)
    assert listing.status_code in (400, 403)
    assert behind.seen == []


@pytest.mark.parametrize("service", ["dynamodb", "DynamoDB", "sqs", "kms", "secretsmanager", "bedrock"])
def test_the_runtimes_other_services_pass_in_any_case(service: str) -> None:
    client, behind = checked()
    other = header_signed(service.lower(), b"{}", secret="wrong")
    other["Authorization"] = other["Authorization"].replace(f"/{service.lower()}/", f"/{service}/")
    assert client.post("/", headers=other, data=b"{}").status_code == 200
    assert len(behind.seen) == 1


def test_a_refusal_line_escapes_what_the_client_sent(caplog: pytest.LogCaptureFixture) -> None:
    """The local S3's refusal line reaches dev.log and a terminal: a method or path carrying escape
    sequences or a newline is written escaped, as the gateway's request line is."""
    client, _ = checked()
    with caplog.at_level("INFO", logger="dovecote-dev"):
        client.open("/b/\x1b[2J", method="GET\x1b[31m\nFAKE", data=b"")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("s3 ")]
    assert lines, caplog.records
    assert all("\x1b" not in line and "\n" not in line for line in lines), lines
    assert "\\x1b[31m\\nFAKE" in lines[-1]


def test_unsigned_and_sigv2_requests_are_refused() -> None:
    client, behind = checked()
    anonymous = client.put("/b/notes/dev/r", data=b"forged")
    assert (anonymous.status_code, code(anonymous)) == (403, "AccessDenied")
    v2 = client.get("/b/k", query_string="AWSAccessKeyId=testing&Signature=x&Expires=9999999999")
    assert (v2.status_code, code(v2)) == (400, "InvalidRequest")
    assert client.head("/b/k").status_code == 403
    assert behind.seen == []
