"""Timing a round's phases: wall time on the CPU, CUDA event pairs on a GPU.

On CPU, a phase is the perf_counter between two marks. On CUDA, each mark records a
torch.cuda.Event on the current stream and `spans()` synchronises once, on the last event,
then reads the elapsed time between consecutive events: the phases are not serialised by a
synchronize each (each costs a round trip to the device), and the times are the device's
own timeline, queueing included.
"""

from __future__ import annotations

import time


class PhaseClock:
    """Marks in order, then the milliseconds between consecutive marks. One owner thread."""

    def __init__(self, cuda: bool = False):
        self.cuda = cuda
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def spans(self) -> list[float]:
        """ms between mark i and mark i + 1, for each i; waits for the device once."""
        marks = self.marks
        if len(marks) < 2:
            return []
        if self.cuda:
            marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(marks, marks[1:], strict=False)]
        return [1000 * (b - a) for a, b in zip(marks, marks[1:], strict=False)]


def on_cuda(*devices) -> bool:
    """Whether any of these torch devices (None allowed) is a CUDA device."""
    return any(d is not None and getattr(d, "type", None) == "cuda" for d in devices)
