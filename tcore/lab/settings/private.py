"""What a lab process holds that the code it runs must not reach: the instructor's passcode and anything named
like a secret in its environment. Workers and the child that reads a model file get an environment without
them; a process that holds one hides its own environment from other processes of its user."""
from __future__ import annotations

import ctypes
import os
import re
import sys
from typing import Mapping

PASSCODE_ENV = "COMPILE_LAB_INSTRUCTOR_PASSCODE"
# whole parts of a variable's name: HF_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD (not TOKENIZERS_PARALLELISM)
_SECRET_NAME = re.compile(r"(^|_)(PASSCODE|PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY|"
                          r"CREDENTIALS?)(_|$)")


def is_private(name: str) -> bool:
    return name == PASSCODE_ENV or bool(_SECRET_NAME.search(name.upper()))


def without_private(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not is_private(k)}


def hide_environment() -> bool:
    """Make this process's /proc/<pid>/environ and memory unreadable to other processes of the same user (what
    ssh-agent does: prctl PR_SET_DUMPABLE 0), so a model file in a worker cannot read the passcode from its
    parent. Root can still read them. Only where there is something to hide (it also keeps debuggers such as
    py-spy out). Returns whether it hid it (Linux only)."""
    if not sys.platform.startswith("linux") or not any(is_private(k) for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False


def reexec_without_private(argv: list[str] | None = None) -> None:
    """Start this program again without the private variables, if it has any: unsetting them in os.environ
    leaves them in /proc/<pid>/environ, which every child of this process (a worker running a model file) can
    read. For processes that never need them (the command line)."""
    if any(is_private(k) for k in os.environ):
        os.execve(sys.executable, list(argv or sys.orig_argv), without_private(os.environ))
