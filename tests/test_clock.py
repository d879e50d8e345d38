"""Round phases timed by wall clock on the CPU and by CUDA event pairs on a GPU (a fake
device timeline here: the project never needs a GPU)."""

from __future__ import annotations

import pytest
import torch

from specviz.core.engine import clock as clock_module
from specviz.core.engine.clock import PhaseClock, on_cuda


class FakeTimeline:
    """torch.cuda.Event stand-in: each record() takes the device's time of the moment."""

    def __init__(self):
        self.now = 0.0  # ms on the device
        self.syncs = 0
        timeline = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.at = None

            def record(self):
                self.at = timeline.now

            def synchronize(self):
                timeline.syncs += 1

            def elapsed_time(self, other):
                assert timeline.syncs, "read before the device was waited for"
                return other.at - self.at

        self.Event = Event


def test_cuda_phases_come_from_event_pairs_with_one_synchronize(monkeypatch):
    fake = FakeTimeline()
    monkeypatch.setattr(torch.cuda, "Event", fake.Event)
    clock = PhaseClock(cuda=True)
    clock.mark()
    fake.now += 3.5  # the draft phase on the device
    clock.mark()
    fake.now += 7.25  # the verify phase
    clock.mark()
    assert clock.spans() == [3.5, 7.25]
    assert fake.syncs == 1  # once, on the last event: not between the phases


def test_cpu_phases_are_wall_time(monkeypatch):
    now = [10.0]

    class Time:
        @staticmethod
        def perf_counter():
            return now[0]

    monkeypatch.setattr(clock_module, "time", Time)
    clock = PhaseClock()
    clock.mark()
    now[0] += 0.002
    clock.mark()
    assert clock.spans() == pytest.approx([2.0])


def test_the_engine_times_on_the_device_its_models_use():
    assert on_cuda(torch.device("cuda"), None) and on_cuda(None, torch.device("cuda", 1))
    assert not on_cuda(torch.device("cpu"), None)
