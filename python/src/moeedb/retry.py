"""When and how long the clients wait before sending a request again.

Only answers that say nothing was done are retried: 429 (the embedding queue is
full) and 503 `unavailable_error` (no primary, too many connections). A 503
`outcome_unknown_error` (the write may be stored) and everything else surface at
once. The wait is exponential (`backoff * 2**attempt`, at most `max_backoff`)
and never shorter than the server's `Retry-After`.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

from moeedb.errors import MoeedbError, RateLimitError, UnavailableError

__all__ = ["RetryPolicy", "parse_retry_after"]

# A Retry-After larger than this is not waited for (the error surfaces instead).
_MAX_RETRY_AFTER = 300.0


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or an HTTP date), or None.

    Negative or unparsable values give None; a date in the past gives 0.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - time.time())
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return seconds


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry a retryable answer and how long to wait between tries.

    `max_retries` 0 disables retries. `backoff` is the first wait in seconds,
    doubled each attempt up to `max_backoff`; `Retry-After` raises a wait, never
    lowers it.
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")

    @staticmethod
    def is_retryable(error: MoeedbError) -> bool:
        """Whether `error` says the request was not carried out (429, 503 unavailable)."""
        return isinstance(error, (RateLimitError, UnavailableError))

    def delay(self, attempt: int, error: MoeedbError) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or None to give up."""
        if attempt >= self.max_retries or not self.is_retryable(error):
            return None
        wait = min(self.max_backoff, self.backoff * (2.0**attempt))
        if error.retry_after is not None:
            if error.retry_after > _MAX_RETRY_AFTER:
                return None
            wait = max(wait, error.retry_after)
        return wait
