"""The fork server: a process that has done a worker's imports once and forks a worker for each run.

Started by tcore.lab.launch.fork_server_client as `python -m tcore.worker.forkserver FD`, where FD is its end of a
SOCK_SEQPACKET socket pair with the lab process. A worker's imports (torch, Inductor, the engine, the
models: tcore.worker.__main__.prepare) cost seconds of a core (bench/worker_start.py measures them), and a
lab process that runs many CPU runs (a test suite, a workshop on a machine without a GPU) would pay them
once per run. A forked worker skips them and is otherwise what `python -m tcore.worker` is: a new
process in its own process group, with the environment the lab gives it, empty compile caches and
nothing compiled (this process never compiles), so its compile is as cold as ever.

CPU only: CUDA cannot be used in a child forked from a process that has touched it, so the lab never
starts this server on a machine with an NVIDIA device (tcore.lab.launch.fork_server_client.available); GPU runs keep
their spare workers, which also start CUDA ahead.

Messages are JSON, one per packet. From the lab: {"id": n, "env": {...}, "cwd": "..."} with three file
descriptors attached (the worker's stdin, stdout and stderr). From here: {"hello": true} once the
imports are done (or {"refused": why}), {"id": n, "forked": pid} for each request (or {"id": n,
"failed": why}), the request's id echoed so that a reply the lab stopped waiting for is never taken
for the next request's, and {"exited": pid, "status": waitstatus} when a worker ends, since only this
process, its parent, can read that status. An empty read means the lab process has gone: this server exits and
leaves its workers running (a lab process that starts next recovers their runs, as it does for
workers started any other way).
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback

MAX_MESSAGE = 1 << 20  # an environment is a few kB


def _send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def _refusal() -> str | None:
    """Why forking workers from here would be wrong, or None."""
    import torch._logging._internal as torch_logs

    if not (hasattr(torch_logs, "_init_logs") and hasattr(torch_logs, "LOG_TRACE_HANDLER")):
        return "this torch cannot be told about a worker's TORCH_TRACE after it was imported"
    return None


def _in_child(sock: socket.socket, wake: tuple[int, int], fds: list[int], env: dict[str, str], cwd: str) -> int:
    """In the forked worker: become what `python -m tcore.worker` started with `env` would be, then run it."""
    os.setpgid(0, 0)  # its own group, so cancelling it also ends the compile workers it starts
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock.close()
    for fd in wake:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [sys.argv[0]]

    from tcore.worker import __main__ as worker

    worker.after_fork()
    return worker.main()


def _request_id(data: bytes):
    """The id of a request that could not be read as a whole, if any of it could."""
    try:
        return json.loads(data).get("id")
    except (ValueError, AttributeError):
        return None


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exited": pid, "status": status})


def serve(sock: socket.socket) -> None:
    wake = os.pipe()
    os.set_blocking(wake[1], False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
    while True:
        readable, _, _ = select.select([sock, wake[0]], [], [])
        if wake[0] in readable:
            os.read(wake[0], 4096)
            _reap(sock)
        if sock not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
        if not data:  # the lab process has gone
            return
        try:
            request = json.loads(data)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except Exception as e:  # noqa: BLE001 (a request that cannot be served is answered, not fatal)
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": _request_id(data), "failed": f"{type(e).__name__}: {e}"})
            continue
        if pid == 0:
            code = 1
            try:
                code = _in_child(sock, wake, fds, request["env"], request["cwd"])
            except BaseException:  # noqa: BLE001 (anything before the worker's own reporting: into its log)
                traceback.print_exc()
            finally:
                from tcore.worker.__main__ import leave

                leave(code)
        try:
            os.setpgid(pid, pid)  # also here, so the group exists before the lab can signal it
        except OSError:
            pass  # the child did it first, or has already ended
        for fd in fds:
            os.close(fd)  # the worker's ends are the worker's alone: its stdout reaches EOF when it exits
        _send(sock, {"id": request.get("id"), "forked": pid})


def main() -> int:
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        from tcore.worker.__main__ import freeze_imports, prepare_for_fork

        prepare_for_fork()
        freeze_imports()
        refusal = _refusal()
    except BaseException as e:  # noqa: BLE001 (the lab starts its workers the usual way, and they report it)
        refusal = f"the imports failed: {type(e).__name__}: {e}"
    if refusal:
        _send(sock, {"refused": refusal})
        return 1
    _send(sock, {"hello": True})
    serve(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
