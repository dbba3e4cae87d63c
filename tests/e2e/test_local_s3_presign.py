"""The local S3 enforces what a presigned URL was signed for (infra/local/s3_auth.py), as S3 does.

Against `dovecote dev`: a real presigned note upload (`POST /v1/notes/uploads`) and a task artifact
upload (`POST /v1/tasks/{id}/artifacts/uploads`, through the SDK) are tampered with every way the
review found moto accepting: another body of the same size, a shorter body, another content type, no
checksum header, a zeroed signature, an expired `X-Amz-Date`, an unsigned PUT. Each gets S3's own error,
and nothing is stored; the honest upload still works, and so do header-signed boto3 calls."""

from __future__ import annotations

import datetime
import hashlib
import socket
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from dovecote.client import DovecoteClient
from tests.e2e.conftest import bearer

Upload = dict[str, Any]


def moto_s3(endpoint: str, *, secret: str = "testing", access_key: str = "testing") -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=access_key,
        aws_secret_access_key=secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )


def where(url: str) -> tuple[str, str, str]:
    """(moto endpoint, bucket, key) of a presigned URL (path style)."""
    parts = urlsplit(url)
    bucket, key = parts.path.lstrip("/").split("/", 1)
    return f"{parts.scheme}://{parts.netloc}", bucket, key


def with_param(url: str, name: str, value: str) -> str:
    """The URL with one query parameter replaced, the others byte for byte as signed."""
    base, query = url.split("?", 1)
    pairs = [p if not p.startswith(name + "=") else f"{name}={quote(value, safe='')}" for p in query.split("&")]
    return base + "?" + "&".join(pairs)


def param(url: str, name: str) -> str:
    return next(p.split("=", 1)[1] for p in url.split("?", 1)[1].split("&") if p.startswith(name + "="))


def error_code(response: httpx.Response) -> str:
    text = response.text
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0] if "<Code>" in text else ""


def stored(s3: Any, bucket: str, key: str) -> bytes | None:
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as exc:
        assert exc.response["Error"]["Code"] in ("NoSuchKey", "404"), exc.response
        return None


def honestly_signed_but_expired(upload: Upload, monkeypatch: pytest.MonkeyPatch) -> str:
    """The same PUT, signed with the runtime's credentials two hours ago for 900 seconds."""
    import botocore.auth

    endpoint, bucket, key = where(upload["upload_url"])
    headers = {k.lower(): v for k, v in upload["upload_headers"].items()}
    params: dict[str, Any] = {"Bucket": bucket, "Key": key, "ContentLength": int(headers["content-length"])}
    params["ChecksumSHA256"] = headers["x-amz-checksum-sha256"]
    if "content-type" in headers:
        params["ContentType"] = headers["content-type"]
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(hours=2)
    with monkeypatch.context() as patched:
        patched.setattr(botocore.auth, "get_current_datetime", lambda *_, **__: past)
        return str(moto_s3(endpoint).generate_presigned_url("put_object", Params=params, ExpiresIn=900))


@pytest.fixture(scope="module")
def note_upload(dev_runtime: dict[str, Any]) -> Upload:
    """A presigned note upload (a unique key: refs are derived from it), not yet used."""
    body = hashlib.sha256(uuid.uuid4().bytes).digest() * 64  # 2 KiB
    coords = {"key": "s3-" + uuid.uuid4().hex[:12], "run": 1, "name": "presigned", "content_type": "text/markdown"}
    answer = httpx.post(
        dev_runtime["endpoint"] + "/v1/notes/uploads",
        json={**coords, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()},
        headers=bearer(dev_runtime["tokens"]["caller"]),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    upload = answer.json()
    assert {k.lower() for k in upload["upload_headers"]} == {"content-length", "content-type", "x-amz-checksum-sha256"}
    return {**upload, "body": body, "coords": coords}


Tamper = Callable[[Upload, pytest.MonkeyPatch], tuple[str, dict[str, str], bytes]]


def _other_body_same_size(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return u["upload_url"], u["upload_headers"], bytes(b ^ 0xFF for b in u["body"])


def _shorter_body(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    headers = {k: v for k, v in u["upload_headers"].items() if k.lower() != "content-length"}
    return u["upload_url"], headers, u["body"][:-1]  # httpx sends its true Content-Length


def _longer_body(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    headers = {k: v for k, v in u["upload_headers"].items() if k.lower() != "content-length"}
    return u["upload_url"], headers, u["body"] + b"!"


def _other_content_type(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return u["upload_url"], {**u["upload_headers"], "Content-Type": "text/html"}, u["body"]


def _no_content_type(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    headers = {k: v for k, v in u["upload_headers"].items() if k.lower() != "content-type"}
    return u["upload_url"], headers, u["body"]


def _no_checksum_header(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    headers = {k: v for k, v in u["upload_headers"].items() if k.lower() != "x-amz-checksum-sha256"}
    return u["upload_url"], headers, u["body"]


def _no_headers(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return u["upload_url"], {}, u["body"]


def _zeroed_signature(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return with_param(u["upload_url"], "X-Amz-Signature", "0" * 64), u["upload_headers"], u["body"]


def _wrong_secret(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    endpoint, bucket, key = where(u["upload_url"])
    h = u["upload_headers"]
    params = {"Bucket": bucket, "Key": key, "ContentLength": int(h["Content-Length"])}
    params |= {"ContentType": h["Content-Type"], "ChecksumSHA256": h["x-amz-checksum-sha256"]}
    url = moto_s3(endpoint, secret="not-the-runtime-secret").generate_presigned_url(
        "put_object", Params=params, ExpiresIn=900
    )
    return str(url), h, u["body"]


def _another_key(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    base, query = u["upload_url"].split("?", 1)
    return f"{base}-elsewhere?{query}", u["upload_headers"], u["body"]


def _expired_date(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    signed = datetime.datetime.strptime(param(u["upload_url"], "X-Amz-Date"), "%Y%m%dT%H%M%SZ")
    stale = (signed - datetime.timedelta(hours=2)).strftime("%Y%m%dT%H%M%SZ")
    return with_param(u["upload_url"], "X-Amz-Date", stale), u["upload_headers"], u["body"]


def _honest_but_expired(u: Upload, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return honestly_signed_but_expired(u, monkeypatch), u["upload_headers"], u["body"]


def _unsigned(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return u["upload_url"].split("?", 1)[0], u["upload_headers"], u["body"]


def _no_signature_parameter(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    base, query = u["upload_url"].split("?", 1)
    kept = "&".join(p for p in query.split("&") if not p.startswith("X-Amz-Signature="))
    return f"{base}?{kept}", u["upload_headers"], u["body"]


def _over_a_week(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    return with_param(u["upload_url"], "X-Amz-Expires", "604801"), u["upload_headers"], u["body"]


def _another_access_key(u: Upload, _: pytest.MonkeyPatch) -> tuple[str, dict[str, str], bytes]:
    credential = param(u["upload_url"], "X-Amz-Credential").replace("testing", "AKIAOTHER", 1)
    url = u["upload_url"].replace(param(u["upload_url"], "X-Amz-Credential"), credential)
    return url, u["upload_headers"], u["body"]


REFUSALS: list[tuple[Tamper, int, str]] = [
    (_other_body_same_size, 400, "BadDigest"),
    (_shorter_body, 403, "SignatureDoesNotMatch"),
    (_longer_body, 403, "SignatureDoesNotMatch"),
    (_other_content_type, 403, "SignatureDoesNotMatch"),
    (_no_content_type, 403, "SignatureDoesNotMatch"),
    (_no_checksum_header, 403, "SignatureDoesNotMatch"),
    (_no_headers, 403, "SignatureDoesNotMatch"),
    (_zeroed_signature, 403, "SignatureDoesNotMatch"),
    (_wrong_secret, 403, "SignatureDoesNotMatch"),
    (_another_key, 403, "SignatureDoesNotMatch"),
    (_expired_date, 403, "AccessDenied"),
    (_honest_but_expired, 403, "AccessDenied"),
    (_unsigned, 403, "AccessDenied"),
    (_no_signature_parameter, 400, "AuthorizationQueryParametersError"),
    (_over_a_week, 400, "AuthorizationQueryParametersError"),
    (_another_access_key, 403, "InvalidAccessKeyId"),
]


@pytest.mark.parametrize(("tamper", "status", "code"), REFUSALS, ids=[t.__name__.strip("_") for t, _, _ in REFUSALS])
def test_a_presigned_note_upload_refuses_what_it_was_not_signed_for(
    note_upload: Upload, monkeypatch: pytest.MonkeyPatch, tamper: Tamper, status: int, code: str
) -> None:
    url, headers, body = tamper(note_upload, monkeypatch)
    answer = httpx.put(url, content=body, headers=headers, timeout=30)
    assert (answer.status_code, error_code(answer)) == (status, code), answer.text
    assert answer.headers["content-type"] == "application/xml"
    if code == "AccessDenied" and "X-Amz-Date" in url:
        assert "<Message>Request has expired</Message>" in answer.text
    # Nothing landed, at the signed key or beside it.
    endpoint, bucket, key = where(note_upload["upload_url"])
    assert stored(moto_s3(endpoint), bucket, key) is None
    assert stored(moto_s3(endpoint), bucket, key + "-elsewhere") is None


def test_fewer_bytes_than_the_signed_content_length_is_an_incomplete_body(note_upload: Upload) -> None:
    parts = urlsplit(note_upload["upload_url"])
    head = [f"PUT {parts.path}?{parts.query} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in note_upload["upload_headers"].items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + note_upload["body"][:-10])
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 400") and b"<Code>IncompleteBody</Code>" in received, received[:400]
    endpoint, bucket, key = where(note_upload["upload_url"])
    assert stored(moto_s3(endpoint), bucket, key) is None


def test_the_honest_note_upload_still_works_and_an_unsigned_put_cannot_replace_its_body(
    dev_runtime: dict[str, Any], note_upload: Upload
) -> None:
    caller = bearer(dev_runtime["tokens"]["caller"])
    body, coords = note_upload["body"], note_upload["coords"]
    endpoint, bucket, key = where(note_upload["upload_url"])
    with httpx.Client(base_url=dev_runtime["endpoint"], headers=caller, timeout=30) as http:
        answer = httpx.put(note_upload["upload_url"], content=body, headers=note_upload["upload_headers"], timeout=30)
        assert answer.status_code == 200, answer.text
        assert stored(moto_s3(endpoint), bucket, key) == body
        digest = hashlib.sha256(body).hexdigest()
        committed = http.put("/v1/notes", json={**coords, "upload": True, "sha256": digest})
        assert committed.status_code == 200, committed.text
        ref = committed.json()["ref"]
        # The committed body's own key, unsigned (the review's PUT to notes/dev/<ref>).
        forged = httpx.put(f"{endpoint}/{bucket}/notes/dev/{ref}", content=b"forged", timeout=30)
        assert (forged.status_code, error_code(forged)) == (403, "AccessDenied")
        got = http.get(f"/v1/notes/{ref}").json()
        assert got["sha256"] == digest and got["content_type"] == "text/markdown"
        assert (got.get("text") or "").encode() == body or got.get("body_b64") or got.get("download_url")
        head = moto_s3(endpoint).head_object(Bucket=bucket, Key=f"notes/dev/{ref}")
        assert head["ContentLength"] == len(body)


def test_header_signed_requests_are_verified_too(note_upload: Upload) -> None:
    endpoint, bucket, _ = where(note_upload["upload_url"])
    probe = f"e2e-probe/{uuid.uuid4().hex}"
    s3 = moto_s3(endpoint)
    s3.put_object(Bucket=bucket, Key=probe, Body=b"signed", ChecksumAlgorithm="SHA256")
    assert stored(s3, bucket, probe) == b"signed"
    with pytest.raises(ClientError) as wrong_secret:
        moto_s3(endpoint, secret="not-the-runtime-secret").put_object(Bucket=bucket, Key=probe, Body=b"x")
    assert wrong_secret.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as wrong_key:
        moto_s3(endpoint, access_key="AKIAOTHER").get_object(Bucket=bucket, Key=probe)
    assert wrong_key.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    assert stored(s3, bucket, probe) == b"signed"
    s3.delete_object(Bucket=bucket, Key=probe)


def test_a_presigned_artifact_upload_refuses_what_it_was_not_signed_for(
    dev_runtime: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's own upload (declared, then PUT with upload_headers) goes through and freezes; the same
    URL tampered with is refused and never replaces what was uploaded."""
    uploads: list[Upload] = []

    def keep(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/artifacts/uploads") and response.status_code == 200:
            response.read()
            uploads.append(response.json())

    endpoint = dev_runtime["endpoint"]
    caller = DovecoteClient(endpoint, dev_runtime["tokens"]["caller"])
    worker = DovecoteClient(endpoint, dev_runtime["tokens"]["worker"], event_hooks={"response": [keep]})
    task_id, workspace = f"t-{uuid.uuid4().hex[:10]}", f"ws-{uuid.uuid4().hex[:10]}"
    caller.create_task(task_id, "make the change", workspace=workspace)
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    payload = hashlib.sha256(b"artifact").digest() * (40 * 1024)  # 1.25 MiB: over the inline limit
    frozen = worker.freeze_artifact(
        task_id, task["revision"], assignment["fence"], "a", "rev-0", payload, media_type="application/octet-stream"
    )
    assert frozen["artifact"]["payload_digest"] == "sha256:" + hashlib.sha256(payload).hexdigest()
    [upload] = uploads
    assert {k.lower() for k in upload["upload_headers"]} == {"content-length", "x-amz-checksum-sha256"}
    upload = {**upload, "body": payload}
    moto, bucket, key = where(upload["upload_url"])
    s3 = moto_s3(moto)
    versions = len(s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", []))
    for tamper, status, code in (
        (_other_body_same_size, 400, "BadDigest"),
        (_shorter_body, 403, "SignatureDoesNotMatch"),
        (_no_checksum_header, 403, "SignatureDoesNotMatch"),
        (_zeroed_signature, 403, "SignatureDoesNotMatch"),
        (_expired_date, 403, "AccessDenied"),
        (_honest_but_expired, 403, "AccessDenied"),
        (_unsigned, 403, "AccessDenied"),
    ):
        url, headers, body = tamper(upload, monkeypatch)
        answer = httpx.put(url, content=body, headers=headers, timeout=60)
        assert (answer.status_code, error_code(answer)) == (status, code), (tamper.__name__, answer.text)
    assert len(s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])) == versions
    assert stored(s3, bucket, key) == payload
    # The honest PUT of the same URL is still taken.
    answer = httpx.put(upload["upload_url"], content=payload, headers=upload["upload_headers"], timeout=60)
    assert answer.status_code == 200, answer.text
