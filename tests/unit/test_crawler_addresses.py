"""The crawler's address guard: every spelling of a forbidden address is refused.

No test touches the network: ``socket.getaddrinfo`` is replaced by a fake resolver that
fails the test when an IP literal reaches it and answers only the names it is given.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from crawlq.crawler.addresses import (
    AddressPolicy,
    check_header_value,
    is_forbidden,
    parse_host,
    resolve_checked,
)
from crawlq.exceptions import AddressRefused, ConfigurationError, CrawlqError

# (host as it appears in a URL, a fragment of the reason it is refused)
FORBIDDEN: list[tuple[str, str]] = [
    # loopback, in every inet_aton / WHATWG spelling
    ("127.0.0.1", "loopback"),
    ("127.1", "loopback"),
    ("127.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0x7f.1", "loopback"),
    ("0x7f.0.0.1", "loopback"),
    ("0X7F.0X0.0X0.0X1", "loopback"),
    ("017700000001", "loopback"),
    ("0177.0.0.01", "loopback"),
    ("0177.1", "loopback"),
    ("127.000.000.001", "loopback"),
    ("00000000000000000177.0.0.1", "loopback"),
    ("0x00000000007f.0.0.1", "loopback"),
    ("2130706433", "loopback"),
    ("0x7F000001", "loopback"),
    ("0x7f000001", "loopback"),
    ("127.0.0.1.", "loopback"),
    ("127.0.0.1..", "loopback"),
    ("2130706433.", "loopback"),
    ("\uff11\uff12\uff17.\uff10.\uff10.\uff11", "loopback"),  # full-width digits
    ("127\u30020\u30020\u30021", "loopback"),  # ideographic full stops
    ("127\uff0e0\uff0e0\uff0e1", "loopback"),  # full-width full stops
    ("%31%32%37.0.0.1", "loopback"),  # percent-encoded
    ("127.0.0.%31", "loopback"),
    # unspecified and "this network"
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("00", "unspecified"),
    ("0x0", "unspecified"),
    ("0x", "unspecified"),
    ("0.1.2.3", "this network"),
    # private networks
    ("10.0.0.1", "private"),
    ("10.1", "private"),
    ("012.0.0.1", "private"),
    ("0xa.0.0.1", "private"),
    ("167772161", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.0.1", "private"),
    ("192.168.1", "private"),
    ("0xc0.0xa8.1.1", "private"),
    ("0300.0250.1.1", "private"),
    ("3232235777", "private"),
    # link-local and cloud metadata
    ("169.254.1.1", "link-local"),
    ("169.254.169.254", "metadata"),
    ("169.254.43518", "metadata"),
    ("0xa9fea9fe", "metadata"),
    ("2852039166", "metadata"),
    ("0251.0376.0251.0376", "metadata"),
    ("169.254.169.254.", "metadata"),
    ("169.254.170.2", "metadata"),
    ("100.100.100.200", "metadata"),
    ("192.0.0.192", "metadata"),
    ("168.63.129.16", "metadata"),
    ("[fd00:ec2::254]", "metadata"),
    ("[FD00:EC2:0:0:0:0:0:254]", "metadata"),
    # shared, multicast, broadcast, reserved and special-purpose ranges
    ("100.64.0.1", "shared address space"),
    ("100.127.255.254", "shared address space"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("4294967295", "broadcast"),
    ("0xffffffff", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("192.0.0.8", "IETF protocol"),
    # IPv6
    ("[::1]", "loopback"),
    ("::1", "loopback"),
    ("[0:0:0:0:0:0:0:1]", "loopback"),
    ("[::]", "unspecified"),
    ("[fe80::1]", "link-local"),
    ("[FE80::ABCD]", "link-local"),
    ("[fe80::1%25eth0]", "link-local"),
    ("[fe80::1%eth0]", "link-local"),
    ("[fc00::1]", "unique local"),
    ("[fd12:3456::1]", "unique local"),
    ("[fec0::1]", "site-local"),
    ("[ff02::1]", "multicast"),
    ("[ff05::1:3]", "multicast"),
    ("[2001:db8::1]", "documentation"),
    ("[100::1]", "discard-only"),
    ("[2001::1]", "Teredo"),
    ("[64:ff9b:1::1]", "local-use NAT64"),
    # IPv6 forms embedding a forbidden IPv4 address
    ("[::ffff:127.0.0.1]", "IPv4-mapped form of 127.0.0.1: loopback"),
    ("[::FFFF:7F00:1]", "IPv4-mapped form of 127.0.0.1: loopback"),
    ("::ffff:7f00:1", "IPv4-mapped form of 127.0.0.1: loopback"),
    ("[0:0:0:0:0:ffff:127.0.0.1]", "IPv4-mapped form of 127.0.0.1"),
    ("[::ffff:169.254.169.254]", "IPv4-mapped form of 169.254.169.254: cloud metadata"),
    ("[::ffff:a9fe:a9fe]", "IPv4-mapped form of 169.254.169.254: cloud metadata"),
    ("[::ffff:10.0.0.1]", "IPv4-mapped form of 10.0.0.1: private"),
    ("[::ffff:192.168.0.1]", "IPv4-mapped form of 192.168.0.1: private"),
    ("[::ffff:0.0.0.0]", "IPv4-mapped form of 0.0.0.0: unspecified"),
    ("[::ffff:100.64.0.1]", "IPv4-mapped form of 100.64.0.1: shared"),
    ("[::ffff:255.255.255.255]", "IPv4-mapped form of 255.255.255.255: broadcast"),
    ("[::127.0.0.1]", "IPv4-compatible form of 127.0.0.1: loopback"),
    ("[::ffff:0:127.0.0.1]", "IPv4-translated form of 127.0.0.1: loopback"),
    ("[64:ff9b::127.0.0.1]", "NAT64 form of 127.0.0.1: loopback"),
    ("[64:ff9b::a9fe:a9fe]", "NAT64 form of 169.254.169.254: cloud metadata"),
    ("[2002:7f00:1::]", "6to4 form of 127.0.0.1: loopback"),
    ("[2002:a9fe:a9fe::1]", "6to4 form of 169.254.169.254: cloud metadata"),
    ("[2002:c0a8:101::1]", "6to4 form of 192.168.1.1: private"),
]

METADATA_SPELLINGS = {host for host, reason in FORBIDDEN if "metadata" in reason}

# Hosts that are not addresses and not names: malformed, so refused before any DNS.
MALFORMED = [
    "1.2.3.256",
    "1.2.3.4.5",
    "256.1",
    "1.16777216",
    "4294967296",
    "09.1",
    "0x1g.1",
    "1..2.3",
    "example.123",
    "[127.0.0.1]",
    "[::ffff:127.1]",
    "[::1",
    "::1::2",
    "127.0.0.1 x",
    "127.0.0.1\n",
    "evil.example@127.0.0.1",
    "%3a%3a1",
    "%ff.example",
    "",
    ".",
]


class FakeDNS:
    """A stand-in for ``socket.getaddrinfo`` that answers from a table and records calls."""

    def __init__(self) -> None:
        self.table: dict[str, list[str]] = {}
        self.calls: list[str] = []

    def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.calls.append(host)
        try:
            ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            pass
        else:
            pytest.fail(f"an IP literal reached DNS: {host!r}")
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        result: list[Any] = []
        for text in self.table[host]:
            if ":" in text:
                sockaddr: tuple[Any, ...] = (text, port, 0, 0)
                result.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", sockaddr))
            else:
                result.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (text, port)))
        return result


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDNS]:
    fake = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield fake


def refused(call: Callable[[], object]) -> str:
    with pytest.raises(AddressRefused) as info:
        call()
    return str(info.value)


def test_the_table_is_large_enough() -> None:
    assert len(FORBIDDEN) >= 60
    assert len({host for host, _ in FORBIDDEN}) == len(FORBIDDEN)


@pytest.mark.parametrize(("host", "reason"), FORBIDDEN)
def test_forbidden_spellings_are_refused_with_the_reason(
    host: str, reason: str, dns: FakeDNS
) -> None:
    ip = parse_host(host)
    assert ip is not None, f"{host!r} was taken for a host name"
    assert reason in (is_forbidden(ip) or "")
    message = refused(lambda: resolve_checked(host, 80, AddressPolicy()))
    assert reason in message and repr(host) in message
    assert dns.calls == []


def test_a_refusal_names_the_flags_that_open_it(dns: FakeDNS) -> None:
    private = refused(lambda: resolve_checked("10.0.0.1", 80, AddressPolicy()))
    assert "--allow-private" in private and "--allow-host" in private
    metadata = refused(lambda: resolve_checked("169.254.169.254", 80, AddressPolicy()))
    assert "--allow-host" in metadata and "--allow-private" not in metadata


@pytest.mark.parametrize(("host", "reason"), FORBIDDEN)
def test_allow_private_opens_all_but_cloud_metadata(host: str, reason: str) -> None:
    policy = AddressPolicy(allow_private=True)
    if host in METADATA_SPELLINGS:
        assert "only an allow entry" in refused(lambda: resolve_checked(host, 443, policy))
    else:
        assert resolve_checked(host, 443, policy) == [parse_host(host)]


@pytest.mark.parametrize("host", MALFORMED)
def test_malformed_hosts_are_refused_before_dns(host: str, dns: FakeDNS) -> None:
    refused(lambda: parse_host(host))
    refused(lambda: resolve_checked(host, 80, AddressPolicy(allow_private=True)))
    assert dns.calls == []


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("1.2.3", "1.2.0.3"),
        ("8.8.8.8.", "8.8.8.8"),
        ("[2606:4700::1111]", "2606:4700::1111"),
        ("2606:4700:0:0:0:0:0:1111", "2606:4700::1111"),
        ("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
    ],
)
def test_parse_host_reads_every_spelling(spelling: str, canonical: str) -> None:
    assert parse_host(spelling) == ipaddress.ip_address(canonical)


def test_parse_host_keeps_the_zone_and_returns_none_for_names() -> None:
    scoped = parse_host("[fe80::1%25eth0]")
    assert isinstance(scoped, ipaddress.IPv6Address) and scoped.scope_id == "eth0"
    for name in ("example.com", "EXAMPLE.com.", "localhost", "0x7f.example", "a-1.b_2.test"):
        assert parse_host(name) is None


@pytest.mark.parametrize(
    "host",
    ["8.8.8.8", "134744072", "[2606:4700::1111]", "2606:4700::1111", "1.1.1.1."],
)
def test_public_addresses_are_accepted_without_dns(host: str, dns: FakeDNS) -> None:
    ip = parse_host(host)
    assert ip is not None and is_forbidden(ip) is None
    assert resolve_checked(host, 443) == [ip]
    assert dns.calls == []


@pytest.mark.parametrize(
    "address", ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "93.184.215.14"]
)
def test_embedded_public_ipv4_is_public(address: str) -> None:
    assert is_forbidden(ipaddress.ip_address(address)) is None


def test_public_names_resolve_to_every_checked_address(dns: FakeDNS) -> None:
    dns.table["example.com"] = ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]
    dns.table["www.example.org"] = ["93.184.215.14", "93.184.215.14", "8.8.4.4"]
    assert resolve_checked("Example.COM", 443) == [
        ipaddress.ip_address("93.184.215.14"),
        ipaddress.ip_address("2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
    ]
    assert resolve_checked("www.example.org", 80) == [
        ipaddress.ip_address("93.184.215.14"),
        ipaddress.ip_address("8.8.4.4"),
    ]
    assert dns.calls == ["example.com", "www.example.org"]


def test_a_trailing_dot_is_kept_once_for_dns(dns: FakeDNS) -> None:
    dns.table["example.com."] = ["93.184.215.14"]
    assert resolve_checked("example.com..", 443) == [ipaddress.ip_address("93.184.215.14")]
    assert dns.calls == ["example.com."]


def test_a_name_with_one_private_address_among_public_ones_is_refused(dns: FakeDNS) -> None:
    dns.table["mixed.example"] = [
        "93.184.215.14",
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
        "192.168.1.10",
    ]
    message = refused(lambda: resolve_checked("mixed.example", 443))
    assert "192.168.1.10" in message and "private" in message


@pytest.mark.parametrize(
    ("name", "answers", "reason"),
    [
        ("localhost", ["127.0.0.1", "::1"], "loopback"),
        ("rebind.example", ["10.0.0.5"], "private"),
        ("mapped.example", ["::ffff:127.0.0.1"], "IPv4-mapped form of 127.0.0.1"),
        ("v6.example", ["fe80::1%eth0"], "link-local"),
        ("imds.example", ["169.254.169.254"], "metadata"),
        ("cgnat.example", ["100.64.1.2"], "shared address space"),
    ],
)
def test_names_resolving_to_forbidden_addresses_are_refused(
    name: str, answers: list[str], reason: str, dns: FakeDNS
) -> None:
    dns.table[name] = dns.table[name + "."] = answers
    assert reason in refused(lambda: resolve_checked(name, 80))
    assert reason in refused(lambda: resolve_checked(name.upper() + ".", 80))
    assert dns.calls == [name, name + "."]


@pytest.mark.parametrize(
    "name", ["metadata.google.internal", "METADATA.google.internal.", "instance-data"]
)
def test_metadata_host_names_are_refused_without_dns(name: str, dns: FakeDNS) -> None:
    policy = AddressPolicy(allow_private=True)
    assert "metadata" in refused(lambda: resolve_checked(name, 80, policy))
    assert dns.calls == []


def test_unresolvable_names_raise_gaierror(dns: FakeDNS) -> None:
    with pytest.raises(socket.gaierror):
        resolve_checked("nowhere.invalid", 80)


@pytest.mark.parametrize("port", [0, -1, 65536, True])
def test_ports_out_of_range_are_refused(port: int) -> None:
    assert "port" in refused(lambda: resolve_checked("8.8.8.8", port))


def test_allow_private_opens_resolved_private_addresses_with_the_zone(dns: FakeDNS) -> None:
    dns.table["lan.example"] = ["fe80::1%eth0", "192.168.1.10"]
    addresses = resolve_checked("lan.example", 80, AddressPolicy(allow_private=True))
    assert [str(a) for a in addresses] == ["fe80::1%eth0", "192.168.1.10"]


def test_allow_networks_open_exactly_what_they_name() -> None:
    policy = AddressPolicy(allow=("10.0.0.0/8", "::1", "127.0.0.1"))
    assert resolve_checked("10.1.2.3", 80, policy) == [ipaddress.ip_address("10.1.2.3")]
    assert resolve_checked("012.1.2.3", 80, policy) == [ipaddress.ip_address("10.1.2.3")]
    assert resolve_checked("[::1]", 80, policy) == [ipaddress.ip_address("::1")]
    assert resolve_checked("127.1", 80, policy) == [ipaddress.ip_address("127.0.0.1")]
    assert resolve_checked("[::ffff:10.9.9.9]", 80, policy)  # mapped form of an allowed one
    for host in ("127.0.0.2", "192.168.1.1", "172.16.0.1", "[fe80::1]", "169.254.169.254"):
        with pytest.raises(AddressRefused):
            resolve_checked(host, 80, policy)


def test_allow_networks_can_open_metadata_explicitly() -> None:
    assert resolve_checked("169.254.169.254", 80, AddressPolicy(allow=("169.254.169.254",)))
    assert resolve_checked("0xa9fea9fe", 80, AddressPolicy(allow=("169.254.0.0/16",)))
    assert resolve_checked("[fd00:ec2::254]", 80, AddressPolicy(allow=("fd00:ec2::/32",)))


def test_allow_names_open_exactly_that_host(dns: FakeDNS) -> None:
    dns.table["intranet.example"] = ["10.0.0.5"]
    dns.table["other.example"] = ["10.0.0.5"]
    dns.table["metadata.google.internal"] = ["169.254.169.254"]
    policy = AddressPolicy(allow=("Intranet.Example.", "metadata.google.internal"))
    assert resolve_checked("INTRANET.example", 80, policy) == [ipaddress.ip_address("10.0.0.5")]
    refused(lambda: resolve_checked("other.example", 80, policy))
    refused(lambda: resolve_checked("10.0.0.5", 80, policy))  # the name, not its address
    assert resolve_checked("metadata.google.internal", 80, policy)


def test_policy_is_frozen_and_normalises_a_list() -> None:
    policy = AddressPolicy(allow=["10.0.0.0/8"])  # type: ignore[arg-type]
    assert policy.allow == ("10.0.0.0/8",)
    assert policy == AddressPolicy(allow=("10.0.0.0/8",))
    with pytest.raises(AttributeError):
        policy.allow_private = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"allow_private": "yes"}, "allow_private"),
        ({"allow_private": 1}, "allow_private"),
        ({"allow": "localhost"}, "sequence"),
        ({"allow": 5}, "sequence"),
        ({"allow": ("10.0.0.1/8",)}, "host bits"),
        ({"allow": ("300.0.0.0/8",)}, "not a valid network"),
        ({"allow": ("10.0.0.0/33",)}, "not a valid network"),
        ({"allow": ("*.example.com",)}, "wildcards"),
        ({"allow": ("",)}, "host name or a network"),
        ({"allow": (None,)}, "host name or a network"),
        ({"allow": ("1.2.3.256",)}, "not a valid host"),
        ({"allow": ("bad host",)}, "not a valid host"),
    ],
)
def test_policy_validation(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        AddressPolicy(**kwargs)


def test_address_refused_is_a_crawlq_error() -> None:
    assert issubclass(AddressRefused, CrawlqError)
    assert "must not connect" in str(AddressRefused())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("User-Agent", "crawlq\r\nX-Injected: 1"),
        ("User-Agent", "crawlq\nX-Injected: 1"),
        ("User-Agent", "crawlq\r"),
        ("Accept", "text/html\x00"),
        ("Accept", "\x7f"),
        ("X-Evil\r\nHost", "a"),
        ("X-Evil\n", "a"),
        ("X-Nul\x00", "a"),
        ("Bad Name", "a"),
        ("Bad:Name", "a"),
        ("", "a"),
    ],
)
def test_header_injection_is_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        check_header_value(name, value)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("User-Agent", "crawlq/0.1 (+https://example.com/bot)"),
        ("Accept", "text/html,application/xhtml+xml;q=0.9\t*/*;q=0.8"),
        ("X-Empty", ""),
        ("Accept-Language", "fr-CH, fr;q=0.9, en;q=0.8, caf\u00e9"),
    ],
)
def test_valid_headers_pass(name: str, value: str) -> None:
    check_header_value(name, value)
