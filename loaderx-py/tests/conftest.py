import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Runs the test with the temporary directory as the working directory (the seed's
    examples use relative paths)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def loaderx_cli():
    """The `loaderx` binary: $LOADERX_CLI, else the workspace's debug build; None if absent
    (the tests that need it then skip, unless LOADERX_REQUIRE_CLI is set)."""
    for candidate in (os.environ.get("LOADERX_CLI"), REPO / "target" / "debug" / "loaderx", shutil.which("loaderx")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    if os.environ.get("LOADERX_REQUIRE_CLI"):
        raise RuntimeError("LOADERX_REQUIRE_CLI is set but no loaderx binary was found (build loaderx-cli)")
    return None


@pytest.fixture
def cli():
    exe = loaderx_cli()
    if exe is None:
        pytest.skip("no loaderx binary (cargo build -p loaderx-cli, or set LOADERX_CLI)")

    def run(*args, check=True):
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=check)

    return run


def threads_now():
    """The loaders' threads of this process (named ``loaderx-...`` by the engine; Python's threading
    module sees none of them). Only those: a suite that imports torch, JAX and Ray has threads of
    theirs come and go at any moment, which made a count of every thread flaky."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("loaderx")
        except OSError:  # the thread ended between the listing and the read
            pass
    return count


# Helpers for `run_isolated` code that forks while a thread works: `children(calls, n)` forks
# `n` children, each making the `(refused, call)` calls in turn (a `LockedError` passes; a call
# marked refused that returns exits 3; one stuck is killed by its alarm) and returns their
# statuses; `busy(work)` runs `work` in a loop on a thread until the returned event is set.
FORK_HELPERS = """
import faulthandler, os, signal, threading
import loaderx
def children(calls, n):
    statuses = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            # A child that hangs says where before its alarm kills it: the call it started (on
            # stderr) and its Python stack ("A forked child that hangs, rarely", reliability.md).
            faulthandler.dump_traceback_later(15, exit=False)
            for k, (refused, call) in enumerate(calls):
                os.write(2, f"child {os.getpid()}: call {k} of {len(calls)}\\n".encode())
                try:
                    call()
                    if refused:
                        os._exit(3)
                except loaderx.LockedError:
                    pass
            os._exit(0)
        statuses.append(os.waitpid(pid, 0)[1])
    return statuses
def busy(work):
    stop = threading.Event()
    def loop():
        while not stop.is_set():
            work()
    t = threading.Thread(target=loop)
    t.start()
    return stop, t
"""


def run_isolated(code, timeout=120, stderr=False):
    """Runs `code` in a fresh interpreter and returns its stdout (and its stderr, when asked);
    a hang (past `timeout` seconds, far beyond what the code needs) or a failure fails the
    calling test instead of hanging the suite."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the child hung (killed after {timeout} s); its output:\n{e.stdout}\n{e.stderr}")
    assert done.returncode == 0, f"the child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return (done.stdout, done.stderr) if stderr else done.stdout
