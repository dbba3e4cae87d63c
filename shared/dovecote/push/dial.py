"""The HTTP post of a notification (the Poster port), with urllib3 (already loaded by botocore):

- the connection goes to the one address the sender checked (push/addresses.py), never to a name
  resolved again: TLS still checks the certificate against the URL's host (SNI and hostname
  checking use the name, the socket the pinned address);
- no redirect is followed, no retry is made here (the queue retries), no proxy is read from the
  environment (urllib3 reads none);
- at most TIMEOUT_S for the whole attempt (connect and read), and at most READ_BOUND bytes of the
  answer are read; the connection is closed after each attempt.

Why not httpx (the SDK's client): pinning an address with certificate checks against the name
takes a custom transport there, and the sender's cold start would load it; urllib3's connection
pools take `server_hostname` and `assert_hostname` as arguments.
"""

from __future__ import annotations

from dovecote.push.addresses import Target
from dovecote.push.model import READ_BOUND, TIMEOUT_S, retry_after_seconds
from dovecote.push.ports import Answer


class PinnedPoster:
    def __init__(self, *, timeout_s: float = TIMEOUT_S, read_bound: int = READ_BOUND) -> None:
        self._timeout_s, self._read_bound = timeout_s, read_bound

    def post(self, target: Target, address: str, body: bytes, headers: dict[str, str]) -> Answer:
        import urllib3
        from urllib3.exceptions import HTTPError

        timeout = urllib3.Timeout(total=self._timeout_s)
        host = address if ":" not in address else f"[{address}]"
        if target.scheme == "https":
            import ssl

            context = ssl.create_default_context(cafile=_ca_bundle())
            pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
                host.strip("[]"),
                target.port,
                server_hostname=target.host,
                assert_hostname=target.host,
                ssl_context=context,
                timeout=timeout,
                retries=False,
                maxsize=1,
            )
        else:
            pool = urllib3.HTTPConnectionPool(host.strip("[]"), target.port, timeout=timeout, retries=False, maxsize=1)
        sent = {**headers, "Host": target.host_header, "Content-Length": str(len(body)), "Connection": "close"}
        try:
            response = pool.urlopen(
                "POST",
                target.target,
                body=body,
                headers=sent,
                redirect=False,
                retries=False,
                preload_content=False,
                assert_same_host=False,
            )
            try:
                head = response.read(self._read_bound, decode_content=False) or b""
            finally:
                response.close()
            wait = response.headers.get("Retry-After")
            return Answer(
                int(response.status),
                retry_after_seconds(wait) if wait else None,
                head[:200].decode("utf-8", "replace"),
            )
        except (HTTPError, OSError, TimeoutError) as exc:
            return Answer(0, None, type(exc).__name__)
        finally:
            pool.close()


def _ca_bundle() -> str | None:
    """The CA bundle the AWS SDK itself trusts (certifi's, when installed), else the system's."""
    try:
        import certifi

        return str(certifi.where())
    except ImportError:
        return None
