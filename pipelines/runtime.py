"""How a process uses the cores it is given: its torch threads (its share, never more), and a second process
for independent work beside its own when it has two cores to itself (`beside`).

Every torch stage runs inside one process that may run several tasks at once: the Prefect flow's threads
runner runs up to `orchestration.max_workers` tasks in one process, a DVC stage or a Dask worker process
runs one task per worker thread. torch's default (one intra-op thread per core, for EVERY concurrent task)
oversubscribes the machine: on a busy 2-core machine small-network steps run many times slower with two threads
per process than with one. So each process sets

    threads = max(1, cores // concurrent)      cores = the CPUs this process may run on (its affinity mask),
                                               capped by OMP_NUM_THREADS when that is set (Dask's nanny sets 1)

with `concurrent` the number of tasks it runs at once. The flow records it before it submits tasks
(`torch_threads(max_workers)`); each task calls `torch_threads()`, which keeps the process's recorded
value (1 in a DVC stage; a Dask worker's thread count inside a Dask worker).

The evaluation's parts on large tables are mostly one core's work each (the attacks' neighbour searches, the
classifiers' fits), and independent: each draws from its own seed. `beside` runs one of them in a second process
while the stage's process goes on with the rest (on a large table the attacks are about half of evaluate@gen's
time, docs/performance.md).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)
BESIDE_MIN_ROWS = 100_000  # below it a second process's start (1.5-3.4 s: a fresh Python importing the part's
# modules) outweighs what it saves (docs/performance.md, "Two processes for the evaluation")
_concurrent = 1


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), capped by OMP_NUM_THREADS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return min(cores, int(omp)) if omp.isdigit() and int(omp) > 0 else cores


def _dask_worker_threads() -> int | None:
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return None


def _share() -> int:
    """The tasks this process runs at once: a Dask worker's thread count inside a Dask worker, else the recorded
    value (module docstring)."""
    return _dask_worker_threads() or _concurrent


def torch_threads(concurrent: int | None = None) -> int:
    """Set torch's intra-op threads to max(1, cores // concurrent) (module docstring) and return it.

    `concurrent`: the tasks this process runs at once, recorded for later calls; None keeps the recorded
    value (1 unless a flow recorded its max_workers), or a Dask worker's thread count inside a Dask worker.
    """
    global _concurrent
    if concurrent is not None:
        if concurrent < 1:
            raise ValueError(f"concurrent must be a positive number of tasks, got {concurrent}")
        _concurrent = int(concurrent)
    import torch  # here, so that `beside`'s users (the evaluation) do not import torch

    share = _concurrent if concurrent is not None else _share()
    threads = max(1, available_cores() // share)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def _second_core() -> bool:
    """Whether this process has two cores to itself (its share, as `torch_threads` counts it) and may start a
    child (a daemonic process, as Dask's and multiprocessing's workers are, may not)."""
    return available_cores() // _share() >= 2 and not multiprocessing.current_process().daemon


def _send_args(connection: Any, args: tuple) -> None:
    """`args` down `connection` for `_receive_args`, a DataFrame a column at a time: pickled whole, a frame is a
    second copy of itself in this process until the child has read it (a 1,000,000-row evaluation's three frames:
    about 1.2 GB at evaluate@gen's peak)."""
    import pandas as pd

    connection.send(len(args))
    for arg in args:
        if isinstance(arg, pd.DataFrame):
            connection.send(("frame", arg.index, arg.columns))
            for i in range(arg.shape[1]):
                connection.send(arg.iloc[:, i].array)
        else:
            connection.send(("value", arg))


def _receive_args(connection: Any) -> tuple:
    """The arguments `_send_args` sent: each frame rebuilt from its index, column labels and column arrays."""
    import pandas as pd

    args = []
    for _ in range(connection.recv()):
        kind, *rest = connection.recv()
        if kind == "frame":
            index, columns = rest
            frame = pd.DataFrame({i: connection.recv() for i in range(len(columns))}, index=index, copy=False)
            frame.columns = columns
            args.append(frame)
        else:
            args.append(rest[0])
    return tuple(args)


def _run_and_send(arguments: Any, connection: Any, fn: Callable[..., Any]) -> None:
    """The second process's body: its arguments read from `arguments`, fn(*args) sent back as ("result", value),
    or its error as ("error", error)."""
    try:
        message = ("result", fn(*_receive_args(arguments)))
    except BaseException as error:  # noqa: BLE001 -- every error goes back to the stage's process
        message = ("error", error)
    try:
        connection.send(message)
    except Exception as unsendable:  # an error (or result) that does not pickle: its text
        connection.send(
            ("error", RuntimeError(f"{message[0]} that could not be sent back: {unsendable!r}; {message[1]!r}"[:4000]))
        )


@contextmanager
def beside(fn: Callable[..., T], *args: Any, rows: int) -> Iterator[Callable[[], T]]:
    """`fn(*args)` run beside this process's own work: yields the call that returns its result.

    It runs in a second, spawned process (a fork would copy JAX's and torch's threads) when the work is large
    (`rows` ≥ BESIDE_MIN_ROWS) and this process has a second core to give it (`_second_core`); otherwise here, at
    once, as if called directly. `fn` must be a module-level function and its arguments picklable; its result is
    the same either way when its randomness comes from its arguments (a seed), as every evaluation part's does
    (tests/test_real_side.py). An error in the second process is raised here when the result is asked for. A
    second process that ends without an answer (it could not start: a `__main__` Python cannot re-import, such as
    a script read from standard input; or it was killed) is logged, and fn(*args) then runs here. The arguments go
    to it down a pipe, a DataFrame a column at a time (`_send_args`). Leaving the
    context (on an error here too) stops the second process."""
    if rows < BESIDE_MIN_ROWS or not _second_core():
        result = fn(*args)
        yield lambda: result
        return
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    read_args, write_args = context.Pipe(duplex=False)
    process = context.Process(target=_run_and_send, args=(read_args, send, fn), daemon=True)  # dies with this one
    process.start()
    send.close()  # this process's copies: the pipes then report the child's ends
    read_args.close()
    try:
        _send_args(write_args, args)
    except OSError:  # the second process ended before it read them: `answer` computes it here
        pass
    finally:
        write_args.close()

    def answer() -> T:
        try:
            kind, value = receive.recv()
        except EOFError:  # the second process ended without answering
            process.join()
            log.warning(
                "the second process for %s ended without an answer (exit code %s); computing it here",
                getattr(fn, "__qualname__", fn),
                process.exitcode,
            )
            return fn(*args)
        if kind == "error":
            raise value
        return value

    try:
        yield answer
    finally:
        if process.is_alive():
            process.terminate()
        process.join()
        receive.close()
