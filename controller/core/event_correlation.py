"""Which Event write a repeated Event deserves, the way Kubernetes' event recorder decides it.

`EventCorrelator.decide` takes one Event about to be emitted (its object, type, reason, message)
and the time, and answers `Create` (a new Event object), `Bump` (raise the count of the Event
already posted for the same object, type, reason and message) or `Drop` (nothing is written).
Pure: the caller (controller.kube.events.EventRecorder) passes `now` and does the writes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

SERIES_WINDOW_S = 600.0
"""A repeat within this long of the series' last occurrence is a count bump, not a new Event
(kube's recorder aggregates over ten minutes too)."""
BUMP_INTERVAL_S = 30.0
"""At most one count bump is written per series in this long; repeats in between are counted into
the next written bump (or dropped, if none comes within the window)."""
SPAM_BURST = 25
"""Events a single object may get at once before the per-object rate applies (kube's spam filter)."""
SPAM_REFILL_S = 300.0
"""One more Event per object per this long once its burst is spent (kube's spam filter)."""
MAX_SERIES = 4096
"""Series and objects remembered; the least recently seen are forgotten first (kube's LRU size)."""

SeriesKey = tuple[str, str, str, str]
"""(object identity, Event type, reason, message)."""


@dataclass(frozen=True, slots=True)
class Create:
    """Post a new Event; `series` is how the recorder remembers its name for later bumps."""

    series: SeriesKey


@dataclass(frozen=True, slots=True)
class Bump:
    """Raise the count of the posted Event `name` to `count` and its lastTimestamp to now."""

    series: SeriesKey
    name: str
    count: int


@dataclass(frozen=True, slots=True)
class Drop:
    """Write nothing: `why` is `Repeat` (counted into the series' next bump) or `Spam` (the object's
    rate is spent)."""

    why: str


Decision = Create | Bump | Drop


@dataclass(slots=True)
class _Series:
    count: int
    """Occurrences so far (what the Event's count says once the next bump is written)."""
    last_seen: float
    last_written: float
    name: str | None = None
    """The posted Event's name (None while its create is in flight)."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass
class EventCorrelator:
    """Remembers the recent series (same object, type, reason, message) and per-object token
    buckets. `decide` starts a series with its Create (so a repeat while that create is in flight
    is held back, not created twice); `forget` ends one whose Event could not be created or is gone."""

    window_s: float = SERIES_WINDOW_S
    bump_interval_s: float = BUMP_INTERVAL_S
    burst: int = SPAM_BURST
    refill_s: float = SPAM_REFILL_S
    max_series: int = MAX_SERIES
    _series: OrderedDict[SeriesKey, _Series] = field(default_factory=OrderedDict)
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    def decide(self, obj: str, type_: str, reason: str, message: str, now: float) -> Decision:
        """Phase order: a live series is bumped or its repeat held back (never a new Event for an
        unchanged reason); otherwise the object's token bucket decides whether a new Event may be
        created at all."""
        key: SeriesKey = (obj, type_, reason, message)
        series = self._series.get(key)
        if series is not None and now - series.last_seen <= self.window_s:
            series.count += 1
            series.last_seen = now
            self._series.move_to_end(key)
            if series.name is None or now - series.last_written < self.bump_interval_s:
                return Drop("Repeat")
            series.last_written = now
            return Bump(key, series.name, series.count)
        if not self._take_token(obj, now):
            return Drop("Spam")
        self._series.pop(key, None)
        self._series[key] = _Series(1, now, now)
        while len(self._series) > self.max_series:
            self._series.popitem(last=False)
        return Create(key)

    def named(self, series: SeriesKey, name: str, now: float) -> None:
        """The series' Event was created under `name`: later repeats bump it. A series forgotten
        meanwhile (its posted Event had expired, so this one replaced it) starts again at one."""
        known = self._series.get(series)
        if known is None:
            known = self._series[series] = _Series(1, now, now)
            while len(self._series) > self.max_series:
                self._series.popitem(last=False)
        known.name = name

    def forget(self, series: SeriesKey) -> None:
        """The series' Event was not created, or is gone (the API server's TTL): the next
        occurrence creates a new one."""
        self._series.pop(series, None)

    def _take_token(self, obj: str, now: float) -> bool:
        """The object's bucket: `burst` tokens, one more each `refill_s`; False when empty."""
        bucket = self._buckets.get(obj)
        if bucket is None:
            bucket = self._buckets[obj] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_series:
                self._buckets.popitem(last=False)
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.refill_s)
            bucket.at = now
            self._buckets.move_to_end(obj)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
