"""The Redis store's Lua and how it reaches the server.

The sources are ``scripts/*.lua``: one file per operation, and ``scripts/prelude.lua``
with the helpers they share, after the key builders generated from ``keys.py``. From
these one set of sources the store runs every operation in one of two ways, chosen when
it connects:

- Redis 7.0 and later: one function library, ``crawlq_<hash>``, holding every script
  as the function ``crawlq_<hash>_<script>`` (``FCALL``). The prelude's helpers are
  defined once, when the library loads, instead of on every call. ``<hash>`` is taken
  from the library's source, so stores of different crawlq versions share a server, each
  with its own library. A server that lacks the library (new, flushed, or its functions
  deleted) gets it on the first call that misses it (``FUNCTION LOAD REPLACE``, then the
  call again).
- Redis 6, or ``?functions=0``: each script is sent whole, the prelude before it
  (``EVALSHA``; ``NOSCRIPT`` -> ``SCRIPT LOAD`` -> ``EVALSHA``).

Either way a script's body runs after ``begin(ARGV)`` (the end of the prelude), which
hands the helpers the call's arguments and fresh per-call tables.

A script whose header names others (``-- Parts: job_complete job_claim``) runs them in
one call: the body of each part comes before its own, as a local function of the part's
ARGV that starts with ``begin`` (``_with_parts``), so a part's body is written once.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from crawlq.stores.redis import keys

FUNCTIONS_SINCE = (7, 0)
"""The first Redis version with functions (``FUNCTION LOAD``, ``FCALL``)."""


def _read_sources() -> tuple[str, dict[str, str]]:
    """The shared head (key builders and prelude) and every other script's body, by
    name. Read once, at import."""
    folder = resources.files("crawlq.stores.redis").joinpath("scripts")
    head = keys.lua_key_builders() + folder.joinpath("prelude.lua").read_text(encoding="utf-8")
    bodies = {
        f.name.removesuffix(".lua"): f.read_text(encoding="utf-8")
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".lua") and f.name != "prelude.lua"
    }
    return head, {name: _with_parts(body, bodies) for name, body in bodies.items()}


_PARTS = re.compile(r"^-- Parts:\s+(.+)$", re.MULTILINE)


def _with_parts(body: str, bodies: dict[str, str]) -> str:
    """``body`` after a local function per part its header names (none: as it is)."""
    named = _PARTS.search(body)
    if named is None:
        return body
    parts = "".join(
        f"local function {part}(ARGV)\nbegin(ARGV)\n{bodies[part]}\nend\n"
        for part in named.group(1).split()
    )
    return parts + body


HEAD, BODIES = _read_sources()
SCRIPTS = tuple(BODIES)
"""The names of the scripts: the files of the scripts folder."""


def script_source(name: str) -> str:
    """The script ``name`` as ``EVALSHA`` runs it: the whole prelude, then the script.
    Built when a runner in that mode first runs it (each is the prelude's size, so all of
    them, built up front, would take megabytes in every process that only calls
    functions)."""
    return "local ARGV, PREFIX = ARGV, ARGV[1]\n" + HEAD + "begin(ARGV)\n" + BODIES[name]


def _library_source(name: str) -> str:
    """The library's source under ``name``: the prelude once, then each script as a
    function (``function(KEYS, ARGV)``, so a script's body reads its arguments as it
    does in ``script_source``)."""
    functions = "".join(
        f"redis.register_function('{name}_{script}', function(KEYS, ARGV)\n"
        f"begin(ARGV)\n{body}\nend)\n"
        for script, body in BODIES.items()
    )
    return f"#!lua name={name}\nlocal ARGV, PREFIX\n{HEAD}{functions}"


LIBRARY = "crawlq_" + hashlib.sha1(_library_source("").encode()).hexdigest()[:12]
"""The library's name, from its source: its source is built again only to load it."""
FUNCTIONS = {name: f"{LIBRARY}_{name}" for name in BODIES}
"""Each script's function name in the library."""


def library_source() -> str:
    """What ``FUNCTION LOAD`` gets: the library named ``LIBRARY``."""
    return _library_source(LIBRARY)


def server_version(client: redis.Redis) -> tuple[int, ...]:
    """The server's version (``INFO server``'s ``redis_version``), major and minor; (0, 0)
    for a server that refuses ``INFO``."""
    try:
        version = str(client.info("server").get("redis_version", "0"))
    except redis.ResponseError:
        return (0, 0)
    return tuple(int(p) if p.isdigit() else 0 for p in [*version.split("."), "0"][:2])


class LuaRunner:
    """Runs the store's scripts on one server, as functions or as ``EVALSHA`` scripts.

    Runs a call at most once: a function is called again only after the server said it
    does not have it (so it did not run)."""

    def __init__(self, client: redis.Redis, functions: bool) -> None:
        self._client = client
        self.functions = functions
        self._idle: list[redis.Connection] = []
        """Connections between two ``_sent`` calls (list.pop and append hold the GIL)."""
        self._pid = os.getpid()
        self._scripts: dict[str, Script] = {}

    def script(self, name: str) -> Script:
        """The ``EVALSHA`` script ``name``, made when first run (``script_source``)."""
        found = self._scripts.get(name)
        if found is None:
            found = self._scripts[name] = self._client.register_script(script_source(name))
        return found

    def __call__(self, script: str, args: Sequence[str | bytes]) -> Any:
        if not self.functions:
            return self.script(script)(keys=[], args=args)
        try:
            return self._fcall(FUNCTIONS[script], args)
        except redis.ResponseError as exc:
            if "function not found" not in str(exc).lower():
                raise
        self._client.function_load(library_source(), replace=True)
        return self._fcall(FUNCTIONS[script], args)

    def _fcall(self, function: str, args: Sequence[str | bytes]) -> Any:
        """``FCALL function 0 *args`` on one of the runner's connections (``_sent``)."""
        return self._sent([("FCALL", function, 0, *args)])[-1]

    def _sent(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` in one write on a connection of the runner's own (made as the
        client's pool makes its own), past the client's per-command layers (its retries,
        which are off, its pool's bookkeeping and metrics), and read their replies: a
        call costs its packing and one round trip. The last command's error reply is
        raised, the others' are returned; an error reply leaves the connection as it is,
        and one that failed on the way is closed (it reconnects when next used)."""
        if self._pid != os.getpid():  # forked: the parent's sockets are not this process's
            self._idle, self._pid = [], os.getpid()
        try:
            conn = self._idle.pop()
        except IndexError:
            pool = self._client.connection_pool
            conn = pool.connection_class(**pool.connection_kwargs)
        try:
            conn.send_packed_command(conn.pack_commands(commands))  # type: ignore[no-untyped-call]
            replies: list[Any] = []
            for _ in commands[1:]:
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
            replies.append(conn.read_response())
            return replies
        except redis.ResponseError:
            raise
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        finally:
            self._idle.append(conn)

    def close(self) -> None:
        """Close the runner's connections (as many as calls ever ran at once)."""
        while self._idle:
            self._idle.pop().disconnect()  # type: ignore[no-untyped-call]

    def after_pop(
        self, wake_list: str, timeout: float, script: str, args: Sequence[str | bytes]
    ) -> Any:
        """``BLPOP wake_list timeout`` and the script pipelined behind it: the server runs
        the script as soon as the pop returns, so its reply comes back with the pop's,
        in one round trip. Returns the script's reply; what the pop returned does not
        matter (a wake-up, the timeout, or an error: the script runs either way). A
        script the server does not have did not run: it is loaded and run now."""
        if self.functions:
            call: tuple[Any, ...] = ("FCALL", FUNCTIONS[script], 0, *args)
        else:
            call = ("EVALSHA", self.script(script).sha, 0, *args)
        try:
            return self._sent([("BLPOP", wake_list, timeout), call])[-1]
        except redis.ResponseError as exc:
            missing = "function not found" in str(exc).lower()
            if missing or isinstance(exc, redis.exceptions.NoScriptError):
                return self(script, args)
            raise
