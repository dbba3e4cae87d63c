"""What S3 checks before it stores a byte, in front of the local runtime's moto server.

moto accepts any S3 request: an unsigned PUT, a zeroed or expired presigned URL, a body other than the
one the URL was signed for. The cloud refuses all of these, and the upload paths rely on it (a
presigned note upload is signed for its `Content-Length`, `Content-Type` and `x-amz-checksum-sha256`).
This WSGI middleware gives the local S3 the same refusals, with S3's own XML errors:

- no signature at all: `403 AccessDenied` (the bucket is private; moto routes unsigned requests to S3);
- SigV2, or a malformed SigV4 query or header: `400 InvalidRequest` / `AuthorizationQueryParametersError`
  / `AuthorizationHeaderMalformed`;
- another access key: `403 InvalidAccessKeyId`; another region: `400` as above;
- a presigned URL past `X-Amz-Date + X-Amz-Expires`: `403 AccessDenied` "Request has expired"; a header
  signature more than 15 minutes off the clock: `403 RequestTimeTooSkewed`;
- a signature that is not the one recomputed from the request as received (method, path, query, every
  signed header with its value: a changed or missing `Content-Type`, `Content-Length` or checksum header
  changes it): `403 SignatureDoesNotMatch`;
- fewer bytes than `Content-Length`: `400 IncompleteBody`; a body whose digest is not its
  `x-amz-checksum-<sha256|sha1|crc32>`: `400 BadDigest`; nor its signed `x-amz-content-sha256`:
  `400 XAmzContentSHA256Mismatch`.

The signature is recomputed with botocore's own signers (`S3SigV4QueryAuth`, `S3SigV4Auth`) and the
checksums with botocore's checksum classes; what is written here is only reading the request back into
botocore's request shape (the parameters, the canonical path, the signed headers' values). Requests
signed for another service (DynamoDB, SQS, KMS, Secrets Manager: the runtime's own boto3 calls) pass
untouched. The check sits in front of the journal (infra/local/journal.py), so a refused request is
never journaled, and a restart replays journaled requests behind it (their signatures have expired).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import time
import xml.etree.ElementTree as ET
from calendar import timegm
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

from werkzeug.wrappers import Response

from infra.local.log_lines import printable

ALGORITHM = "AWS4-HMAC-SHA256"
# The runtime's other services, by the signing name in a credential scope, lowercased as moto reads
# it to route the request: these pass to moto unchecked. Every other name is S3's to check: moto
# routes "S3" (any case) to S3 as well, and S3 itself accepts only "s3".
OTHER_SERVICES = frozenset({"dynamodb", "sqs", "kms", "secretsmanager", "bedrock"})
# S3's limits: a presigned URL lives at most a week; a header-signed request may be 15 minutes off.
MAX_EXPIRES = 7 * 24 * 3600
MAX_SKEW = 15 * 60
QUERY_AUTH = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Expires",
)
TIMESTAMP = "%Y%m%dT%H%M%SZ"
_AUTH_HEADER = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+)\s*,\s*SignedHeaders=(?P<signed>[^,\s]+)\s*,"
    r"\s*Signature=(?P<signature>[0-9a-fA-F]+)\s*$"
)
log = logging.getLogger("dovecote-dev")


class Refused(Exception):
    """An S3 error answer: status, code, message and the extra elements S3 adds to it."""

    def __init__(self, status: int, code: str, message: str, **extra: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra

    def response(self) -> Response:
        root = ET.Element("Error")
        for name, value in (("Code", self.code), ("Message", self.message), *self.extra.items()):
            ET.SubElement(root, name).text = value
        ET.SubElement(root, "RequestId").text = secrets.token_hex(8).upper()
        ET.SubElement(root, "HostId").text = base64.b64encode(secrets.token_bytes(24)).decode()
        body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root)
        return Response(body, status=self.status, content_type="application/xml")


def _signature_mismatch(access_key: str, string_to_sign: str, provided: str, canonical: str) -> Refused:
    return Refused(
        403,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.",
        AWSAccessKeyId=access_key,
        StringToSign=string_to_sign,
        SignatureProvided=provided,
        CanonicalRequest=canonical,
    )


@dataclass(frozen=True)
class _Signed:
    """A SigV4 signature as the request carries it (query string or Authorization header)."""

    access_key: str
    date: str  # YYYYMMDD of the credential scope
    region: str
    service: str
    signed_headers: list[str]
    signature: str


def _scope(credential: str) -> tuple[str, str, str, str] | None:
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not all(parts[:4]):
        return None
    return parts[0], parts[1], parts[2], parts[3]


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """The query's parameters, percent-decoded (no `+` for space: SigV4 encodes a space as %20)."""
    pairs = []
    for item in query.split("&") if query else []:
        name, _, value = item.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def _header(environ: dict[str, Any], name: str) -> str | None:
    """A request header as the client sent it; None when absent (werkzeug sets an empty
    CONTENT_TYPE / CONTENT_LENGTH for a request without them)."""
    lower = name.lower()
    if lower in ("content-type", "content-length"):
        value = environ.get(lower.upper().replace("-", "_"))
        return str(value) if value else None
    value = environ.get("HTTP_" + lower.upper().replace("-", "_"))
    return None if value is None else str(value)


def _canonical_path(environ: dict[str, Any]) -> str:
    """The path S3 signs: each byte of the decoded path percent-encoded except unreserved
    characters and `/` (what botocore does to a key), never normalized."""
    raw = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "")
    if raw.startswith("/"):
        return quote(unquote_to_bytes(raw.split("?", 1)[0]), safe="/~")
    return quote(str(environ.get("PATH_INFO") or "/").encode("latin-1"), safe="/~")


def _checksums() -> dict[str, Callable[[], Any]]:
    from botocore.httpchecksum import Crc32Checksum, Sha1Checksum, Sha256Checksum

    # crc32c and crc64nvme need awscrt, which is not installed; moto takes those as they are.
    return {"sha256": Sha256Checksum, "sha1": Sha1Checksum, "crc32": Crc32Checksum}


@dataclass(eq=False)
class S3Auth:
    """WSGI middleware: S3 requests are verified as S3 would (module docstring); others pass."""

    app: Callable[..., Iterable[bytes]]
    _: KW_ONLY
    access_key: str
    secret_key: str = field(repr=False)  # never in a log line
    region: str
    clock: Callable[[], float] = time.time

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            self.check(environ)
        except Refused as refused:
            path = _canonical_path(environ)
            method = printable(str(environ.get("REQUEST_METHOD") or ""))  # a client's bytes: escaped
            log.info("s3 %s %s %d %s", method, printable(path), refused.status, refused.code)
            return refused.response()(environ, start_response)
        return self.app(environ, start_response)

    def check(self, environ: dict[str, Any]) -> None:
        """Raise `Refused` for a request S3 would refuse; leave the body readable for moto."""
        params = _query_pairs(str(environ.get("QUERY_STRING") or ""))
        names = {name for name, _ in params}
        authorization = _header(environ, "Authorization") or ""
        if names & {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"}:
            signed = self._query_signature(params)
            presigned = True
        elif authorization.startswith(ALGORITHM):
            signed = self._header_signature(authorization)
            if signed.service.lower() in OTHER_SERVICES:
                return  # the runtime's DynamoDB, SQS, KMS, Secrets Manager and Bedrock calls
            presigned = False
        elif authorization or {"AWSAccessKeyId", "Signature"} <= names:
            raise Refused(
                400,
                "InvalidRequest",
                "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
            )
        else:
            raise Refused(403, "AccessDenied", "Access Denied")
        if signed.service != "s3":
            raise Refused(
                400,
                "AuthorizationQueryParametersError" if presigned else "AuthorizationHeaderMalformed",
                f'The authorization header is malformed; incorrect service "{signed.service}". '
                'This endpoint belongs to "s3".',
            )
        if signed.access_key != self.access_key:
            raise Refused(
                403,
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
                AWSAccessKeyId=signed.access_key,
            )
        if signed.region != self.region:
            code = "AuthorizationQueryParametersError" if presigned else "AuthorizationHeaderMalformed"
            what = "X-Amz-Credential parameter" if presigned else "authorization header"
            raise Refused(
                400,
                code,
                f"Error parsing the {what}; the region '{signed.region}' is wrong; expecting '{self.region}'",
                Region=self.region,
            )
        timestamp = self._timestamp(environ, params, presigned)
        # The headers as signed, read before the body is (re)placed for moto.
        # A signed header the request lacks is signed here as empty: the signature then differs.
        headers: dict[str, str] = {}
        for name in signed.signed_headers:
            value = environ.get("HTTP_HOST") if name == "host" else _header(environ, name)
            headers[name] = "" if value is None else str(value)
        body = _read_body(environ)
        self._verify(environ, params, headers, body, signed, timestamp, presigned)
        _check_body(environ, body, headers)

    # ---- the signature as sent --------------------------------------------------------------------

    def _query_signature(self, params: list[tuple[str, str]]) -> _Signed:
        given: dict[str, str] = {}
        for name, value in params:
            if name in QUERY_AUTH and name in given:
                raise _query_error(f"{name} is given more than once")
            given[name] = value
        if not all(given.get(name) for name in QUERY_AUTH):
            raise _query_error(
                "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
                "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."
            )
        if given["X-Amz-Algorithm"] != ALGORITHM:
            raise _query_error('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
        scope = _scope(given["X-Amz-Credential"])
        if scope is None:
            raise _query_error("Error parsing the X-Amz-Credential parameter; the Credential is mal-formed")
        return _Signed(*scope, given["X-Amz-SignedHeaders"].split(";"), given["X-Amz-Signature"])

    @staticmethod
    def _header_signature(authorization: str) -> _Signed:
        found = _AUTH_HEADER.match(authorization)
        scope = _scope(found["credential"]) if found else None
        if found is None or scope is None:
            raise Refused(400, "AuthorizationHeaderMalformed", "The authorization header is malformed")
        return _Signed(*scope, found["signed"].split(";"), found["signature"])

    def _timestamp(self, environ: dict[str, Any], params: list[tuple[str, str]], presigned: bool) -> str:
        now = self.clock()
        if presigned:
            given = dict(params)
            stamp, expires = given["X-Amz-Date"], given["X-Amz-Expires"]
            signed_at = _parse_timestamp(stamp)
            if signed_at is None:
                raise _query_error("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
            if not expires.isdigit():
                raise _query_error("X-Amz-Expires should be a number")
            if not 0 < int(expires) <= MAX_EXPIRES:
                raise _query_error("X-Amz-Expires must be less than a week (in seconds) that is 604800")
            if now > signed_at + int(expires):
                raise Refused(
                    403,
                    "AccessDenied",
                    "Request has expired",
                    **{"X-Amz-Expires": expires},
                    Expires=_iso(signed_at + int(expires)),
                    ServerTime=_iso(now),
                )
            return stamp
        stamp = _header(environ, "X-Amz-Date") or ""
        signed_at = _parse_timestamp(stamp)
        if signed_at is None:
            raise Refused(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
        if abs(now - signed_at) > MAX_SKEW:
            raise Refused(
                403,
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
                RequestTime=stamp,
                ServerTime=_iso(now),
                MaxAllowedSkewMilliseconds=str(MAX_SKEW * 1000),
            )
        return stamp

    # ---- the signature recomputed -----------------------------------------------------------------

    def _verify(
        self,
        environ: dict[str, Any],
        params: list[tuple[str, str]],
        headers: dict[str, str],
        body: bytes,
        signed: _Signed,
        timestamp: str,
        presigned: bool,
    ) -> None:
        from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        credentials = Credentials(self.access_key, self.secret_key)
        signer_class = S3SigV4QueryAuth if presigned else S3SigV4Auth
        signer = signer_class(credentials, signed.service, signed.region)
        # botocore signs request.url's path as it stands (S3 paths are not normalized) and the
        # parameters it is given, encoded and sorted; the query signature is not one of them.
        request = AWSRequest(
            method=str(environ.get("REQUEST_METHOD", "GET")),
            url=f"http://{headers.get('host') or environ.get('HTTP_HOST', '')}{_canonical_path(environ)}",
            headers=headers,
            data=body,
            params=[(name, value) for name, value in params if name != "X-Amz-Signature"],
        )
        request.context["timestamp"] = timestamp
        canonical = signer.canonical_request(request)
        string_to_sign = signer.string_to_sign(request, canonical)
        expected = signer.signature(string_to_sign, request)
        if not hmac.compare_digest(expected, signed.signature.lower()):
            raise _signature_mismatch(signed.access_key, string_to_sign, signed.signature, canonical)


def _query_error(message: str) -> Refused:
    return Refused(400, "AuthorizationQueryParametersError", message)


def _parse_timestamp(stamp: str) -> float | None:
    try:
        return float(timegm(time.strptime(stamp, TIMESTAMP)))
    except ValueError:
        return None


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _read_body(environ: dict[str, Any]) -> bytes:
    """The whole body, put back for moto. Fewer bytes than Content-Length: S3's IncompleteBody."""
    from werkzeug.exceptions import ClientDisconnected
    from werkzeug.wsgi import get_input_stream

    from infra.local.journal import replace_body

    declared = _header(environ, "Content-Length")
    try:
        body = get_input_stream(environ).read()
    except ClientDisconnected:
        body = None
    if body is None or (declared is not None and declared.isdigit() and len(body) != int(declared)):
        raise Refused(
            400,
            "IncompleteBody",
            "You did not provide the number of bytes specified by the Content-Length HTTP header",
        )
    replace_body(environ, body)
    return body


def _check_body(environ: dict[str, Any], body: bytes, signed: dict[str, str]) -> None:
    """The body against its checksum headers (S3 checks them signed or not) and, for a
    header-signed request, against its signed payload hash."""
    if "aws-chunked" in (_header(environ, "Content-Encoding") or ""):
        return  # a chunked upload carries its checksums in trailers; moto decodes the framing
    declared_hash = signed.get("x-amz-content-sha256", "")
    if re.fullmatch(r"[0-9a-fA-F]{64}", declared_hash):
        computed = hashlib.sha256(body).hexdigest()
        if computed != declared_hash.lower():
            raise Refused(
                400,
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
                ClientComputedContentSHA256=declared_hash,
                S3ComputedContentSHA256=computed,
            )
    for algorithm, checksum_class in _checksums().items():
        declared = _header(environ, f"x-amz-checksum-{algorithm}")
        if declared is None:
            continue
        try:
            digest = base64.b64decode(declared, validate=True)
        except binascii.Error:
            digest = b""
        checksum = checksum_class()
        if len(digest) != len(checksum.digest()):
            raise Refused(400, "InvalidRequest", f"Value for x-amz-checksum-{algorithm} header is invalid.")
        checksum.update(body)
        if digest != checksum.digest():
            raise Refused(
                400, "BadDigest", f"The {algorithm.upper()} you specified did not match the calculated checksum."
            )
