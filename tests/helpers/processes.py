"""Child processes: the command line's import probe and an open-file limit set before exec."""

from __future__ import annotations

import textwrap

# Runs the command line (its arguments) in a fresh interpreter and reports whether torch got
# imported: usage errors must come before the heavy imports.
TORCH_PROBE = textwrap.dedent("""
    import sys
    from secure_fedgraph.cli import main
    try:
        status = main(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code
    print("torch imported" if "torch" in sys.modules else "torch not imported")
    sys.exit(status)
""")

_EXEC_UNDER_LIMIT = ("import os, resource, sys; soft, hard = int(sys.argv[1]), int(sys.argv[2]); "
                     "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard < 0 else hard; "
                     "resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)); os.execv(sys.argv[3], sys.argv[3:])")


def under_open_file_limit(argv: list[str], soft: int, hard: int = -1) -> list[str]:
    """``argv`` run under a soft limit of ``soft`` open files (and ``hard``; -1 keeps it), set by
    a small launcher that then execs ``argv``. Not ``preexec_fn``: it makes Python fork this
    process, gRPC's fork handler restarts its poller in the child, and the child can abort with
    ``epoll_wait error: Bad file descriptor`` before it execs (grpc/grpc#43055)."""
    import sys

    return [sys.executable, "-c", _EXEC_UNDER_LIMIT, str(soft), str(hard), *argv]
