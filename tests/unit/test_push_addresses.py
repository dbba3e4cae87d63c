"""The SSRF check (dovecote/push/addresses.py): the issue's table, with a resolver that answers a
public name with whatever the test says (DNS rebinding included), and the URL's own shape."""

from __future__ import annotations

import pytest

from dovecote.platform.errors import InvalidArgument
from dovecote.push import addresses


class Answers:
    """A resolver answering each name from a table (what an attacker's DNS would say)."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return list(self.table.get(host, []))


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("10.0.0.1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00::1", "unique-local"),
        ("fd00:ec2::254", "metadata"),
        ("::1", "loopback"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("64:ff9b::a00:1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
    ],
)
def test_a_public_name_answering_a_refused_address_is_refused(answer: str, why: str) -> None:
    resolver = Answers({"hooks.example.com": [answer]})
    with pytest.raises(InvalidArgument) as refused:
        addresses.check("https://hooks.example.com/in", resolver)
    assert why in refused.value.message
    assert refused.value.details["field"] == "url"
    assert refused.value.details["refused"] == "address"
    assert refused.value.details["address"] == answer


def test_one_refused_address_among_public_ones_refuses_the_url() -> None:
    resolver = Answers({"hooks.example.com": ["93.184.215.14", "10.0.0.1"]})
    with pytest.raises(InvalidArgument, match="private"):
        addresses.check("https://hooks.example.com/", resolver)


def test_a_public_address_is_accepted_and_pinned() -> None:
    resolver = Answers({"hooks.example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})
    target = addresses.check("https://hooks.example.com:8443/in?x=1", resolver)
    assert target.addresses == ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert (target.host, target.port, target.target, target.host_header) == (
        "hooks.example.com",
        8443,
        "/in?x=1",
        "hooks.example.com:8443",
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.1/",
        "https://[::ffff:10.0.0.1]/",
        "https://[::1]:8080/",
        "https://0x7f000001/",
        "https://2130706433/",
    ],
)
def test_literal_addresses_are_judged_without_dns(url: str) -> None:
    resolver = Answers({"0x7f000001": ["127.0.0.1"], "2130706433": ["127.0.0.1"]})
    with pytest.raises(InvalidArgument) as refused:
        addresses.check(url, resolver)
    assert refused.value.details["refused"] == "address"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/", "scheme"),
        ("ftp://hooks.example.com/", "scheme"),
        ("https://user:pw@hooks.example.com/", "userinfo"),
        ("https://hooks.example.com/#frag", "fragment"),
        ("https:///nohost", "host"),
        ("https://hooks.example.com/a b", "format"),
        ("https://hooks.example.com/\u00e9", "format"),
        ("https://hooks.example.com/\n", "format"),
        ("https://under_score.example.com/", "host"),
        ("https://nowhere.invalid/", "unresolved"),
        ("https://hooks.example.com:99999/", "format"),
        ("https://hooks.example.com:0/", "format"),
    ],
)
def test_the_url_shape_is_refused_with_its_reason(url: str, reason: str) -> None:
    resolver = Answers({"hooks.example.com": ["93.184.215.14"], "under_score.example.com": ["93.184.215.14"]})
    with pytest.raises(InvalidArgument) as refused:
        addresses.check(url, resolver)
    assert refused.value.details["refused"] == reason


def test_plain_http_is_for_loopback_only_and_only_when_allowed() -> None:
    resolver = Answers({"localhost": ["127.0.0.1", "::1"], "hooks.example.com": ["93.184.215.14"]})
    with pytest.raises(InvalidArgument):
        addresses.check("http://localhost:9000/", resolver)
    target = addresses.check("http://localhost:9000/in", resolver, allow_loopback=True)
    assert target.addresses == ("127.0.0.1", "::1") and target.scheme == "http"
    # The switch opens loopback, nothing else: plain http elsewhere, and private ranges, stay refused.
    with pytest.raises(InvalidArgument, match="https"):
        addresses.check("http://hooks.example.com/", resolver, allow_loopback=True)
    with pytest.raises(InvalidArgument, match="private"):
        addresses.check("https://10.0.0.1/", resolver, allow_loopback=True)
    with pytest.raises(InvalidArgument, match="metadata"):
        addresses.check("http://169.254.169.254/", resolver, allow_loopback=True)


def test_the_check_answers_what_the_resolver_says_now() -> None:
    """DNS rebinding: a name public at config time and private at send time is refused then."""
    resolver = Answers({"hooks.example.com": ["93.184.215.14"]})
    addresses.check("https://hooks.example.com/", resolver)
    resolver.table["hooks.example.com"] = ["127.0.0.1"]
    with pytest.raises(InvalidArgument, match="loopback"):
        addresses.check("https://hooks.example.com/", resolver)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://10.0.0.1/hook", "a webhook may not reach a private address: the url names 10.0.0.1"),
        (
            "https://hooks.example.com/",
            "a webhook may not reach a private address: hooks.example.com resolves to 10.0.0.1",
        ),
        (
            "http://127.0.0.1:8794/hook",
            "a webhook may not reach a loopback address: the url names 127.0.0.1 (a receiver on this machine: "
            "run dovecote dev with --allow-loopback-webhooks)",
        ),
    ],
)
def test_an_address_refusal_is_a_whole_sentence_naming_the_way_out(url: str, message: str) -> None:
    resolver = Answers({"hooks.example.com": ["10.0.0.1"]})
    with pytest.raises(InvalidArgument) as refused:
        addresses.check(url, resolver)
    assert refused.value.message == message
