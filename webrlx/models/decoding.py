"""How decoding runs, shared by LanguageModel (llm.py) and the batched Engine (engine.py): the
sampling settings and the step constants."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

READ_EVERY = 8           # decode steps between token readbacks
# Read-ahead: every READ_EVERY steps the tokens are copied aside (Executable.start_read) and
# read READ_LAG steps later, when the copy is long done, so the GPU always has steps queued.
# A read that waits for every step submitted (READ_AHEAD False; the first token and the last
# are still read so) empties the queue: the GPU idles while the read comes back and the host
# encodes the next step. A stop token is seen READ_LAG steps later than that way.
READ_AHEAD = True
READ_LAG = 2
PREFILL_BUCKET = 16      # prompt lengths are padded to a multiple of this (fewer plans)


@dataclass
class Sampling:
    """How the next token is drawn; temperature 0 is greedy."""
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int = 0

    def check(self) -> None:
        """Raise ValueError naming the first argument out of range."""
        if not isinstance(self.temperature, (int, float)) or not self.temperature >= 0:
            raise ValueError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_k, (int, np.integer)) or self.top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0: off), got {self.top_k!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.repetition_penalty, (int, float)) or \
                not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, got "
                             f"{self.repetition_penalty!r}")
        if not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 1 << 31:
            raise ValueError(f"seed must be an int in [0, 2**31), got {self.seed!r}")

    def fparams(self) -> np.ndarray:
        return np.array([self.temperature, self.top_p, self.repetition_penalty, 0],
                        np.float32)

    def iparams(self) -> np.ndarray:
        return np.array([self.top_k, self.seed], np.int32)
