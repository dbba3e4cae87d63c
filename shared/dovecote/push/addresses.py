"""Where a webhook may point (SSRF): checked when a config is created, and again at every send
against the addresses the name resolves to then (DNS rebinding), one of which the sender dials
itself (push/dial.py: the connection is pinned to that address; no redirect, no proxy).

A URL is accepted when it is `https` (plain `http` only to a loopback address, and only with
`allow_loopback`, which only `dovecote dev --allow-loopback-webhooks` sets), has a host and no
userinfo or fragment, and *every* address its host resolves to is public: none loopback, private,
link-local (the cloud metadata service, 169.254.169.254, included), unique-local, CGNAT, multicast,
reserved or documentation; an IPv4-mapped or NAT64 IPv6 address is judged by the IPv4 address it
carries. A refusal is InvalidArgument (400 / A2A InvalidParams) with the reason in words, and which check
refused it (`refused`). Pure apart from the
Resolver port.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from dovecote.platform.errors import InvalidArgument

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# (network, why it is refused). Checked in order; an address none names must still be `is_global`.
REFUSED: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "an unspecified address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT (CGNAT) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.169.254/32", "the cloud metadata service"),
        ("169.254.0.0/16", "a link-local address"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol assignment"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("fd00:ec2::254/128", "the cloud metadata service"),
        ("fc00::/7", "a unique-local address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
        ("100::/64", "a discard-only address"),
        ("2001:db8::/32", "a documentation address"),
        ("2002::/16", "a 6to4 address"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# A host as a URL may write it: a DNS name of ASCII labels, an IPv4 literal, or an [IPv6] literal.
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.?")
_URL_TEXT = re.compile(r"[\x21-\x7e]+")  # visible ASCII: no space, no control, no non-ASCII


class Resolver(Protocol):
    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to (TCP), as text; [] when it does not resolve."""
        ...


class SystemResolver:
    """getaddrinfo, as the process's own resolver answers (the Lambda's VPC-less resolver)."""

    def resolve(self, host: str, port: int) -> list[str]:
        import socket

        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return []
        return list(dict.fromkeys(str(info[4][0]) for info in found))


@dataclass(frozen=True, slots=True)
class Target:
    """A checked webhook: where to dial (`addresses`, all public) and what to ask for."""

    url: str
    scheme: str
    host: str  # as the URL names it (the TLS server name, the Host header)
    port: int
    target: str  # path and query, as sent in the request line
    addresses: tuple[str, ...]

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def refusal(address: str, *, allow_loopback: bool = False) -> str | None:
    """Why a webhook may not reach `address` (None: it may)."""
    try:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    carried = _carried_ipv4(ip)
    if carried is not None:
        why = refusal(str(carried), allow_loopback=False)
        return None if why is None else f"{why} (IPv4 {carried} inside an IPv6 address)"
    if allow_loopback and ip.is_loopback:
        return None
    for network, why in REFUSED:
        if ip.version == network.version and ip in network:
            return why
    if not ip.is_global:
        return "not a public address"
    return None


def _carried_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def check(url: str, resolver: Resolver, *, allow_loopback: bool = False) -> Target:
    """The webhook `url` checked against what `resolver` answers now; InvalidArgument (field `url`,
    with `reason`) when it may not be reached."""
    if not isinstance(url, str) or not _URL_TEXT.fullmatch(url):
        raise _refused("the url must be visible ASCII with no spaces (percent-encode the rest)", "format")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _refused("the url is not a valid URL", "format") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise _refused("a webhook url is https", "scheme")
    if parts.username is not None or parts.password is not None:
        raise _refused("a webhook url carries no user or password: put credentials in authentication", "userinfo")
    if parts.fragment or url.endswith("#"):
        raise _refused("a webhook url has no fragment", "fragment")
    host = (parts.hostname or "").lower()
    if not host:
        raise _refused("the url has no host", "host")
    literal = _literal(host)
    if literal is None and not _HOST.fullmatch(host):
        raise _refused("the url's host is not a DNS name or an IP address", "host")
    if port == 0:
        raise _refused("the url's port 0 is no port a receiver listens on", "format")
    port = port or (443 if scheme == "https" else 80)
    addresses = [literal] if literal is not None else resolver.resolve(host.rstrip("."), port)
    if not addresses:
        raise _refused(f"the url's host {host} does not resolve", "unresolved")
    for address in addresses:
        why = refusal(address, allow_loopback=allow_loopback)
        if why is not None:
            detail = f"{host} resolves to {address}" if literal is None else f"the url names {address}"
            hint = ""
            if ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                hint = " (a receiver on this machine: run dovecote dev with --allow-loopback-webhooks)"
            raise _refused(f"a webhook may not reach {why}: {detail}{hint}", "address", address=address)
    if scheme == "http" and not (allow_loopback and all(ipaddress.ip_address(a).is_loopback for a in addresses)):
        raise _refused(
            "a webhook url is https (plain http only to loopback, under dovecote dev --allow-loopback-webhooks)",
            "scheme",
        )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(url, scheme, host.rstrip("."), port, target, tuple(addresses))


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def _refused(message: str, refused: str, **facts: str) -> InvalidArgument:
    """`refused`: which check refused it (format, scheme, userinfo, fragment, host, unresolved, address)."""
    return InvalidArgument(message, field="url", refused=refused, **facts)
