"""Python's cycle collector held off while a big answer is reduced.

Reducing 50,000 pods builds a few hundred thousand small dicts and lists, none of them in a reference cycle;
each time enough of them are allocated the collector walks every tracked object of the process again, which
took about a quarter of the reduction's time. `paused()` turns it off for the duration and back on when the
last of the threads that paused it is done (the nodes and the pods are reduced on two threads at once).
Nothing is lost meanwhile: objects no longer referenced are still freed at once; only cycles wait.

On the way out the objects built meanwhile are frozen (gc.freeze): they are the verb's answer and live as
long as it does, and the first collection after the pause would otherwise walk them all once more. A capacity
read happens once per process, so the few cycles frozen with them are never missed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()
