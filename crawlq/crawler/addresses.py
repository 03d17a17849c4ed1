"""The address guard: which hosts and addresses the crawler may connect to.

The contract, for every URL and every redirect hop:

1. ``resolve_checked(host, port, policy)`` turns the URL host into addresses, either by
   reading an IP literal in any spelling that browsers or libc accept (``parse_host``) or by
   resolving the name with ``socket.getaddrinfo`` (every result is kept);
2. it refuses with ``AddressRefused`` when ANY of those addresses is forbidden
   (``is_forbidden``) and the policy does not open it;
3. the caller connects to one of the returned addresses and nothing else (pinning), so a
   second DNS answer cannot swap in an address that was never checked.

Forbidden: loopback, private, link-local, multicast, unspecified, reserved, shared address
space, documentation and benchmarking ranges, broadcast, cloud metadata endpoints, and the
IPv6 forms that embed any of these (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64,
6to4) or are not globally routable (Teredo, local-use NAT64, ...).

``AddressPolicy(allow_private=True)`` opens every forbidden address except the cloud
metadata endpoints; those open only when an ``allow`` entry names them (a network that
contains them, or the host name used). Only the standard library is used.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeAlias

from crawlq.exceptions import AddressRefused, ConfigurationError

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "AddressPolicy",
    "IPAddress",
    "check_header_value",
    "is_forbidden",
    "parse_host",
    "resolve_checked",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

#: Cloud instance-metadata and platform endpoints; ``allow_private`` does not open them.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "fd00:ec2::254",  # AWS instance metadata over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer (a public address, refused anyway)
    )
)

#: Host names of metadata services, refused before any DNS look-up.
METADATA_HOSTS: frozenset[str] = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

# First match wins; anything not matched but not globally routable is refused too.
_V4_RANGES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/32"), "unspecified address"),
    (_V4("0.0.0.0/8"), "'this network' (0.0.0.0/8)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("10.0.0.0/8"), "private network"),
    (_V4("172.16.0.0/12"), "private network"),
    (_V4("192.168.0.0/16"), "private network"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("100.64.0.0/10"), "shared address space (carrier-grade NAT)"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments"),
    (_V4("192.0.2.0/24"), "documentation range"),
    (_V4("198.51.100.0/24"), "documentation range"),
    (_V4("203.0.113.0/24"), "documentation range"),
    (_V4("198.18.0.0/15"), "benchmarking range"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast (deprecated)"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("240.0.0.0/4"), "reserved"),
)

_V6_RANGES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified address"),
    (_V6("::1/128"), "loopback"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64"),
    (_V6("100::/64"), "discard-only"),
    (_V6("2001::/32"), "Teredo"),
    (_V6("2001:2::/48"), "benchmarking range"),
    (_V6("2001:db8::/32"), "documentation range"),
    (_V6("3fff::/20"), "documentation range"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local (deprecated)"),
    (_V6("fc00::/7"), "unique local (private network)"),
    (_V6("ff00::/8"), "multicast"),
)

_MAPPED = _V6("::ffff:0:0/96")
_TRANSLATED = _V6("::ffff:0:0:0/96")
_NAT64 = _V6("64:ff9b::/96")
_SIXTOFOUR = _V6("2002::/16")
_COMPATIBLE = _V6("::/96")

# WHATWG URL: a host whose last label is a number must be an IPv4 address.
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")
_NOT_IN_NAME = re.compile(r"[\s/\\@?#%:\[\]<>^|*\"']")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def _refuse(host: str, detail: str) -> AddressRefused:
    return AddressRefused(f"host {host!r}: {detail}")


def _unscoped(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None:
        return ipaddress.IPv6Address(ip.packed)
    return ip


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _MAPPED:
        return "IPv4-mapped", low
    if ip in _TRANSLATED:
        return "IPv4-translated", low
    if ip in _NAT64:
        return "NAT64", low
    if ip in _SIXTOFOUR:
        return "6to4", ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
    if ip in _COMPATIBLE and int(ip) > 1:
        return "IPv4-compatible", low
    return None


def _is_metadata(ip: IPAddress) -> bool:
    ip = _unscoped(ip)
    if ip in METADATA_ADDRESSES:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        return embedded is not None and embedded[1] in METADATA_ADDRESSES
    return False


def is_forbidden(ip: IPAddress) -> str | None:
    """The reason the crawler must not connect to ``ip``, or None when it is public.

    IPv6 forms that embed an IPv4 address are judged by the embedded address: a
    forbidden one refuses them, with the form named in the reason. IPv4-mapped and NAT64
    forms of a public IPv4 address are public (DNS64 networks return NAT64 addresses);
    IPv4-compatible forms (``::a.b.c.d``, deprecated) are always refused.
    """
    ip = _unscoped(ip)
    if ip in METADATA_ADDRESSES:
        return "cloud metadata endpoint"
    if isinstance(ip, ipaddress.IPv4Address):
        for net4, reason in _V4_RANGES:
            if ip in net4:
                return reason
    else:
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            kind, v4 = embedded
            inner = is_forbidden(v4)
            if inner is not None:
                return f"{kind} form of {v4}: {inner}"
            if kind == "IPv4-compatible":
                return "IPv4-compatible address (deprecated)"
            if kind in ("IPv4-mapped", "NAT64"):
                return None
        for net6, reason in _V6_RANGES:
            if ip in net6:
                return reason
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not globally routable"
    return None


def _parse_ipv4_number(part: str, host: str) -> int:
    try:
        if part.startswith("0x"):
            return int(part[2:] or "0", 16)
        if len(part) > 1 and part.startswith("0"):
            return int(part, 8)
        return int(part, 10)
    except ValueError:
        raise _refuse(host, f"malformed IPv4 address (bad part {part!r})") from None


def _parse_ipv4(name: str, host: str) -> ipaddress.IPv4Address | None:
    parts = name.split(".")
    if not _NUMBER.fullmatch(parts[-1]):
        return None
    if len(parts) > 4 or "" in parts:
        raise _refuse(host, "malformed IPv4 address")
    numbers = [_parse_ipv4_number(part, host) for part in parts]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise _refuse(host, "malformed IPv4 address (a part is out of range)")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _normalise(host: str) -> tuple[str, bool]:
    """(lower-case host without brackets or trailing dots, whether it is IPv6 syntax)."""
    text = unicodedata.normalize("NFKC", host).translate(_DOTS).lower()
    if text.startswith("[") or text.endswith("]"):
        if not (text.startswith("[") and text.endswith("]")):
            raise _refuse(host, "unbalanced brackets")
        return text[1:-1].replace("%25", "%"), True
    if ":" in text:
        return text.replace("%25", "%"), True
    try:
        text = urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise _refuse(host, "percent-encoding that is not UTF-8") from None
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(_DOTS).lower().rstrip(".")
    if not text:
        raise _refuse(host, "empty host")
    if any(unicodedata.category(c).startswith("C") for c in text) or _NOT_IN_NAME.search(text):
        raise _refuse(host, "characters not allowed in a host name")
    return text, False


def parse_host(host: str) -> IPAddress | None:
    """The IP address that the URL host ``host`` denotes, or None for a host name.

    Accepts every spelling that browsers (WHATWG URL) or libc ``inet_aton`` read as an
    address: one to four parts in decimal, octal (leading 0) or hex (0x), the last part
    filling the remaining bytes (``127.1``, ``0x7f.1``, ``2130706433``, ``017700000001``);
    IPv6 with or without brackets and with a zone id (``%eth0`` or ``%25eth0``, kept as
    ``scope_id``); upper case, trailing dots, percent-encoding and full-width digits or
    dots. Raises ``AddressRefused`` for a host that is neither: a malformed address, such
    as a host whose last label is a number but which is not valid IPv4 (``1.2.3.256``,
    ``1.2.3.4.5``, ``09.1``), or one with characters no host name contains.
    """
    text, is_ipv6 = _normalise(host)
    if is_ipv6:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            raise _refuse(host, "malformed IPv6 address") from None
    return _parse_ipv4(text, host)


def _key(host: str) -> str:
    return unicodedata.normalize("NFKC", host).translate(_DOTS).lower().strip("[]").rstrip(".")


def _parse_allow_entry(entry: object) -> IPNetwork | str:
    if not isinstance(entry, str) or not entry.strip():
        raise ConfigurationError(f"allow entry {entry!r} must be a host name or a network")
    text = entry.strip().lower()
    if "/" in text:
        try:
            return ipaddress.ip_network(text, strict=True)
        except ValueError as exc:
            raise ConfigurationError(
                f"allow entry {entry!r} is not a valid network: {exc}"
            ) from None
    if "*" in text:
        raise ConfigurationError(f"allow entry {entry!r}: wildcards are not supported")
    try:
        ip = parse_host(text)
    except AddressRefused as exc:
        raise ConfigurationError(f"allow entry {entry!r} is not a valid host: {exc}") from None
    if ip is not None:
        return ipaddress.ip_network(_unscoped(ip))
    return _key(text)


@dataclass(frozen=True)
class AddressPolicy:
    """Which forbidden addresses the crawler may connect to anyway.

    ``allow_private`` opens every forbidden address except cloud metadata endpoints.
    ``allow`` holds host names (the URL host as written, case and trailing dots ignored:
    every address it resolves to is opened) and networks or addresses (``10.0.0.0/8``,
    ``::1``; an address inside one is opened, also in its IPv4-mapped or other embedded
    IPv6 forms). Invalid settings raise ``ConfigurationError``.
    """

    allow_private: bool = False
    allow: tuple[str, ...] = ()
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)
    _names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.allow_private, bool):
            raise ConfigurationError(
                f"allow_private must be True or False, not {self.allow_private!r}"
            )
        raw: object = self.allow
        if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
            raise ConfigurationError(
                f"allow must be a sequence of host names or networks, not {raw!r}"
            )
        entries = tuple(raw)
        parsed = [_parse_allow_entry(entry) for entry in entries]
        object.__setattr__(self, "allow", entries)
        object.__setattr__(self, "_networks", tuple(p for p in parsed if not isinstance(p, str)))
        object.__setattr__(self, "_names", frozenset(p for p in parsed if isinstance(p, str)))

    def _allows_network(self, ip: IPAddress) -> bool:
        candidates: list[IPAddress] = [_unscoped(ip)]
        if isinstance(ip, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(ip)
            if embedded is not None:
                candidates.append(embedded[1])
        return any(
            c.version == net.version and c in net for c in candidates for net in self._networks
        )

    def names(self, host: str) -> bool:
        """Whether an ``allow`` entry names the host ``host`` (case, trailing dots ignored)."""
        return _key(host) in self._names

    def refusal(self, ip: IPAddress, host: str | None = None) -> str | None:
        """Why ``ip`` (reached through URL host ``host``) is refused, or None if allowed."""
        reason = is_forbidden(ip)
        if reason is None:
            return None
        if host is not None and self.names(host):
            return None
        if self._allows_network(ip):
            return None
        if _is_metadata(ip):
            return (
                f"{reason}; only an allow entry naming it opens it "
                "(crawlq crawl --allow-host HOST|NET, or AddressPolicy(allow=...))"
            )
        if self.allow_private:
            return None
        return (
            f"{reason}; crawlq crawl --allow-private (allow_private=True) or an allow "
            "entry (--allow-host HOST|NET) opens it"
        )


def resolve_checked(host: str, port: int, policy: AddressPolicy | None = None) -> list[IPAddress]:
    """The addresses of ``host``, every one checked against ``policy``; connect only to these.

    An IP literal (any ``parse_host`` spelling) is checked without DNS. A name is resolved
    with ``socket.getaddrinfo`` and ALL its addresses are checked: one forbidden address
    refuses the host, even next to public ones. Returns the distinct addresses in resolver
    order. Raises ``AddressRefused`` for a refused or malformed host or a bad port, and lets
    ``socket.gaierror`` (an ``OSError``) through when the name does not resolve.
    """
    policy = policy or AddressPolicy()
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise _refuse(host, f"port {port!r} is out of range")
    ip = parse_host(host)
    if ip is not None:
        reason = policy.refusal(ip, host)
        if reason is not None:
            raise _refuse(host, f"{ip} is refused: {reason}")
        return [ip]
    name, _ = _normalise(host)
    if name in METADATA_HOSTS and not policy.names(host):
        raise _refuse(host, "cloud metadata host name")
    query = name + "." if host.rstrip().endswith(".") else name
    try:
        infos = socket.getaddrinfo(query, port, type=socket.SOCK_STREAM)
    except UnicodeError:
        raise _refuse(host, "not a valid international host name") from None
    addresses: list[IPAddress] = []
    for family, _type, _proto, _canonical, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            raise _refuse(host, f"resolved to an address of family {family!r}")
        try:
            resolved = ipaddress.ip_address(str(sockaddr[0]))
        except ValueError:
            raise _refuse(host, f"resolved to a malformed address {sockaddr[0]!r}") from None
        if resolved not in addresses:
            addresses.append(resolved)
    if not addresses:
        raise _refuse(host, "resolved to no address")
    for resolved in addresses:
        reason = policy.refusal(resolved, host)
        if reason is not None:
            raise _refuse(host, f"resolves to {resolved}, which is refused: {reason}")
    return addresses


def check_header_value(name: str, value: str) -> None:
    """Refuse a request header that could split or smuggle a request.

    The name must be an RFC 9110 token; the value must hold no CR, LF, NUL or other
    control character except tab. Raises ``ConfigurationError`` naming the header.
    """
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise ConfigurationError(
            f"header name {name!r} is not a valid token (no CR, LF, NUL, spaces or ':')"
        )
    if not isinstance(value, str):
        raise ConfigurationError(f"header {name!r} value must be a string, not {value!r}")
    for char in value:
        if (ord(char) < 32 and char != "\t") or char == "\x7f":
            raise ConfigurationError(
                f"header {name!r} value contains the control character {char!r} "
                "(CR, LF and NUL would allow header injection)"
            )
