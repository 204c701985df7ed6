"""The lab side of the fork server (tcore.worker.forkserver): start it, have it fork workers, learn how they ended.

tcore.lab.launch.launcher.Worker asks spawn() first: on a machine without a GPU it returns a worker forked
from a process that has done the imports once, without a fresh process's seconds of imports (bench/worker_start.py).
It returns None where the server must not or cannot be used (a GPU machine, $COMPILE_LAB_FORK_SERVER=0,
a server that refused or died), and the launcher starts the worker as its own process.

One server per set of environment variables that torch and its libraries read at import (the
launcher's IMPORT_TIME_ENV): when those change in the lab process, the next worker comes from a new
server started under the new values, and the old one ends once the workers it forked have ended.
"""
from __future__ import annotations

import glob
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time

from tcore.host import processes

SWITCH_ENV = "COMPILE_LAB_FORK_SERVER"  # "0": start every worker as its own process
IMPORTS_TIMEOUT_S = 180.0  # the server's imports, on a loaded machine; past it, workers start the usual way
REPLY_TIMEOUT_S = 30.0
STATUS_LOST = -1000  # a returncode no process has: its server ended before it could say how the worker ended
# A worker gone (or a zombie its server does not reap) this long with no word from a server that is stopped or hung:
# it has ended, how is not known. A live server says so within milliseconds of the worker's exit.
GONE_GRACE_S = 5.0


class StillImporting(Exception):
    """The fork server is still doing its imports, and the caller asked not to wait (a spare)."""


def available() -> bool:
    """Whether workers may be forked here: not on a machine with an NVIDIA device (CUDA cannot be used in a
    child forked from a process that touched it), not where $COMPILE_LAB_FORK_SERVER=0, and only on Linux."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if not (hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX") and hasattr(os, "fork")):
        return False
    return not (os.path.exists("/dev/nvidiactl") or glob.glob("/dev/nvidia[0-9]*"))


class ForkedProcess:
    """A worker that the fork server forked: the part of subprocess.Popen that the launcher uses.

    It is not this process's child, so its exit status comes from the server (ForkServer's reader).
    """

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int) -> None:
        self.pid = pid
        self.args = ["tcore.worker (forked)"]
        self.stdin = open(stdin_fd, "w")
        self.stdout = open(stdout_fd, "r")
        self.returncode: int | None = None
        self._ended = threading.Event()
        self._gone_since: float | None = None  # when this process first saw the worker gone, its server silent

    def _end(self, returncode: int) -> None:
        if not self._ended.is_set():  # the first word stands: a late one from a server that resumed changes nothing
            self.returncode = returncode
            self._ended.set()

    def poll(self) -> int | None:
        if self.returncode is None and self._gone():
            self._end(STATUS_LOST)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, from its server; STATUS_LOST for a worker gone GONE_GRACE_S while its server, stopped or
        hung, said nothing (the run's end must not wait for a server that may never go on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended.wait(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))):
            if self._gone():
                self._end(STATUS_LOST)
            elif deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def _gone(self) -> bool:
        """Whether the worker has been gone (or a zombie) for GONE_GRACE_S with no word from its server."""
        if processes.is_alive(self.pid, None):
            self._gone_since = None
            return False
        now = time.monotonic()
        if self._gone_since is None:
            self._gone_since = now
        return now - self._gone_since >= GONE_GRACE_S


class ForkServer:
    """One running `python -m tcore.worker.forkserver`, started with `env`; `key` is what of it torch reads at import.
    """

    def __init__(self, env: dict[str, str], key: dict[str, str], cwd: str) -> None:
        self.key = key
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tcore.worker.forkserver", str(theirs.fileno())], pass_fds=[theirs.fileno()],
                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        finally:
            theirs.close()
        self.refused: str | None = None
        self._greeted = threading.Event()
        self._replies: queue.Queue = queue.Queue()
        self._lock = threading.Lock()  # one request at a time
        self._next_id = 0
        self._waiting_for: int | None = None  # the id of the request spawn() waits on; None between requests
        self._workers: dict[int, ForkedProcess | None] = {}  # pid -> its process, None until the requester has it
        self._early: dict[int, int] = {}  # exit statuses that came before the requester built the process
        self._unclaimed: set[int] = set()  # workers forked for a request that had stopped waiting: stopped here
        self._state = threading.Lock()
        self._retiring = False
        self.alive = True
        threading.Thread(target=self._read, name=f"forkserver-{self.proc.pid}", daemon=True).start()

    def spawn(self, env: dict[str, str], cwd: str, stdin_fd: int, stdout_fd: int, stderr_fd: int, *,
              wait: bool) -> int | None:
        """Fork a worker with `env` and these three descriptors as its stdin, stdout and stderr; its pid, or None.
        While the server is still importing: StillImporting unless `wait`."""
        if not wait and not self._greeted.is_set() and self.alive:
            raise StillImporting()
        if not self._greeted.wait(IMPORTS_TIMEOUT_S) or self.refused or not self.alive:
            return None
        with self._lock:
            with self._state:
                self._next_id += 1
                self._waiting_for = request = self._next_id
            try:
                socket.send_fds(self._sock, [json.dumps({"id": request, "env": env, "cwd": cwd}).encode()],
                                [stdin_fd, stdout_fd, stderr_fd])
                reply = self._reply_to(request, time.monotonic() + REPLY_TIMEOUT_S)
            except (OSError, queue.Empty):
                reply = None
            finally:
                with self._state:  # from here a reply to this request is late: _read() stops the worker it names
                    self._waiting_for = None
        return reply.get("forked") if reply else None

    def _reply_to(self, request: int, deadline: float) -> dict | None:
        """The reply to `request` (None: the server ended); queue.Empty past the deadline. A reply to an earlier
        request, put here as that request gave up waiting, is not this one's: the worker it names is stopped."""
        while (reply := self._replies.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            if reply.get("id") == request:
                return reply
            if "forked" in reply:
                self._unclaim(reply["forked"])
        return None

    def _unclaim(self, pid: int) -> None:
        with self._state:
            self._workers.pop(pid, None)
            self._unclaimed.add(pid)
            if pid in self._early:  # it has ended already: nothing more will come of it
                del self._early[pid]
                self._unclaimed.discard(pid)
        _stop_unclaimed(pid)

    def process(self, pid: int, stdin_fd: int, stdout_fd: int) -> ForkedProcess:
        """The ForkedProcess for a pid that spawn() returned."""
        proc = ForkedProcess(pid, stdin_fd, stdout_fd)
        with self._state:
            self._workers[pid] = proc
            if pid in self._early:
                self._ended(pid, self._early.pop(pid))
        return proc

    def retire(self) -> None:
        """Take no more requests; end once the workers it forked have ended."""
        with self._state:
            self._retiring = True
            idle = not self._workers
        if idle:
            self._close()

    def _close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # the server reads nothing more and exits
        except OSError:
            pass

    def _ended(self, pid: int, returncode: int) -> None:
        """Under self._state."""
        if pid in self._unclaimed:
            self._unclaimed.discard(pid)
            return
        proc = self._workers.pop(pid, None)
        if proc is not None:
            proc._end(returncode)
        else:
            self._early[pid] = returncode

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "hello" in message or "refused" in message:
                self.refused = message.get("refused")
                self._greeted.set()
            elif "exited" in message:
                with self._state:
                    self._ended(message["exited"], os.waitstatus_to_exitcode(message["status"]))
                    done = self._retiring and not self._workers
                if done:
                    self._close()
            else:  # "forked" or "failed": the answer to a request
                with self._state:
                    awaited = message.get("id") is not None and message.get("id") == self._waiting_for
                    if awaited and "forked" in message:
                        self._workers.setdefault(message["forked"], None)
                if awaited:
                    self._replies.put(message)
                elif "forked" in message:  # its requester gave up waiting and started its worker another way
                    self._unclaim(message["forked"])
        self.alive = False
        self._greeted.set()
        self._replies.put(None)
        self._sock.close()
        with self._state:
            orphans = [p for p in self._workers.values() if p is not None]
            self._workers.clear()
        for proc in orphans:
            threading.Thread(target=_follow_orphan, args=(proc,), daemon=True).start()
        self.proc.wait()


def _stop_unclaimed(pid: int) -> None:
    """A worker forked for a request whose reply came too late: nobody will hand it a run, and its run's stdin and
    stdout ends are closed; end its group (its exit status still comes, and is let go as nobody's)."""
    processes.end_group(pid)


def _follow_orphan(proc: ForkedProcess) -> None:
    """Its server ended before it did: wait for it to go, without its exit status."""
    while processes.is_alive(proc.pid, None):
        time.sleep(0.2)
    proc._end(STATUS_LOST)


_SERVER: ForkServer | None = None
_LOCK = threading.Lock()


def spawn(env: dict[str, str], *, cwd: str, server_env: dict[str, str], key: dict[str, str], stderr_fd: int,
          wait: bool = True) -> ForkedProcess | None:
    """A worker forked with exactly `env` in `cwd`, its stderr on `stderr_fd`; None where the launcher should start
    it itself.

    The first call starts the server. A caller that may wait (a run's own thread) waits for its imports, which cost
    no more than a worker's own would; one that must not (a spare, started from the queue's thread) gets
    StillImporting and starts no worker for now. Not one started afresh instead: on the CPU, a process's peak RSS
    (the CPU's peak-memory figure) counts the library pages its own imports touched, about 0.26 GiB more in a
    worker started afresh than in a forked one, so the runs of one lab process all come the same way.

    server_env: what a server started for it runs with (`env` less what is the worker's own); key: the part of
    `env` that torch and its libraries read at import, which the server must have been started with.
    """
    global _SERVER
    if not available():
        return None
    with _LOCK:
        if _SERVER is not None and (_SERVER.key != key or not _SERVER.alive):
            _SERVER.retire()
            _SERVER = None
        if _SERVER is None:
            try:
                _SERVER = ForkServer(server_env, key, cwd)
            except OSError:
                return None
        server = _SERVER
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        pid = server.spawn(env, cwd, stdin_r, stdout_w, stderr_fd, wait=wait)
    except StillImporting:
        os.close(stdin_w)
        os.close(stdout_r)
        raise
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    if pid is None:
        os.close(stdin_w)
        os.close(stdout_r)
        return None
    return server.process(pid, stdin_w, stdout_r)
