"""crawlq's modules byte-compiled before a benchmark starts crawlq's processes.

``pip install crawlq`` writes a ``.pyc`` file for every module, and so did every peer's
install. The benches run crawlq installed editable, which writes none, and this machine
sets ``PYTHONDONTWRITEBYTECODE``: each crawlq process would then parse and compile its
modules again at every start. That costs CPU (0.12 s for a crawl's 89 modules) and
memory (about 1.6 MiB more peak RSS for a worker), neither of which a user's install pays.
"""

from __future__ import annotations

import subprocess

CODE = (
    "import compileall, os, crawlq; "
    "print('compiled' if compileall.compile_dir(os.path.dirname(crawlq.__file__), quiet=1) "
    "else 'failed')"
)
"""Run by the interpreter that runs crawlq: it compiles for its own version."""


def compile_crawlq(python: str, env: dict[str, str] | None = None) -> bool:
    """Byte-compile the crawlq that ``python`` imports; whether every module compiled."""
    try:
        out = subprocess.run(
            [python, "-c", CODE], capture_output=True, text=True, timeout=120, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "compiled"
