"""The numpy reference as a device: executables on it interpret their graph op by op with the
rules of webrlx/reference.py. It is the test oracle and the fallback where no adapter exists."""
from __future__ import annotations

import threading
from collections import Counter

from ..device_info import DeviceInfo

INFO = DeviceInfo(name="numpy reference", backend="reference")


class ReferenceDevice:
    """A device that interprets graphs in numpy (float64 math, rounded to each node's dtype)."""

    name = "reference"
    info = INFO
    can_run_sync = True

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()   # nothing is created on a device: stays empty
        self.lock = threading.RLock()          # engines keep per-executable state

    def flush(self) -> None:
        """Nothing is ever held here (the GPU backends' flush: hand held runs to the GPU)."""

    def __repr__(self) -> str:
        return "<ReferenceDevice numpy>"
