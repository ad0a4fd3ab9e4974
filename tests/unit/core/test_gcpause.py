"""The cycle collector is held off while any thread reduces a big answer, and back as it was after."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from kubectl_tao.core import gcpause


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_paused_on_two_threads_until_the_last_is_done() -> None:
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gcpause.paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with gcpause.paused():
        assert not gc.isenabled()
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread still reduces
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_what_was_built_meanwhile_is_frozen_and_a_disabled_collector_stays_off() -> None:
    gc.unfreeze()
    gc.disable()
    with gcpause.paused():
        built = [{"n": i} for i in range(1000)]
    assert not gc.isenabled()
    assert gc.get_freeze_count() >= len(built)


def test_an_error_inside_still_turns_it_back_on() -> None:
    gc.enable()
    with pytest.raises(ValueError), gcpause.paused():
        raise ValueError("x")
    assert gc.isenabled()
