"""Progress lines for the waits on data: downloads, tokenizer training, corpus encoding.

One line on stderr that rewrites itself (``\\r``) at most every ``every_s`` seconds::

    downloading wikitext-103-raw-v1.zip: 48.2/191.9 MB  25%  6.1 MB/s  ETA 0:24

and ends with a final line (``... 191.9 MB in 0:31 (6.2 MB/s)``). It is meant for a person
watching, so it prints nothing when stderr is not a terminal (logs, CI, a sweep's captured
trial output), when ``ATTNLAB_QUIET`` is set to anything but ``0``/``false``/``no``, and on
DDP ranks other than 0 (``RANK`` / ``LOCAL_RANK``), so N ranks never interleave N bars.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO, TypeVar

QUIET_ENV = "ATTNLAB_QUIET"
T = TypeVar("T")


def console_enabled(stream: TextIO | None = None) -> bool:
    """Whether progress goes to ``stream`` (default ``sys.stderr``): a TTY, not quiet, rank 0."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return False
    if any(os.environ.get(k, "0").strip() not in ("", "0") for k in ("RANK", "LOCAL_RANK")):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def clock(seconds: float) -> str:
    """``m:ss`` under an hour, else ``h:mm:ss``."""
    s = int(round(max(seconds, 0.0)))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def amount(n: float, unit: str) -> str:
    """``12.3 MB`` for bytes (decimal megabytes), else ``12,345 lines``."""
    return f"{n / 1e6:.1f} MB" if unit == "bytes" else f"{int(n):,} {unit}"


def _rate(per_s: float, unit: str) -> str:
    return f"{per_s / 1e6:.1f} MB/s" if unit == "bytes" else f"{per_s:,.0f} {unit}/s"


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: the part before the first ": " is cut first."""
    if len(text) <= width:
        return text
    head, sep, tail = text.partition(": ")
    room = width - len(sep) - len(tail)
    if not sep or room < 4:
        return text[-width:] if width > 0 else ""
    return head[: room - 3] + "..." + sep + tail


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # not a real terminal (e.g. a test's fake one)
        return shutil.get_terminal_size().columns


class Progress:
    """A self-updating progress line: ``what: done/total unit  pct  rate  ETA``.

    Args:
        what: what is happening ("downloading x.zip").
        total: the amount when done (None: unknown; then no percentage or ETA). May be set later.
        unit: ``bytes`` (shown as MB) or a countable noun ("lines", "sentences", "pairs", "files").
        initial: amount already done before this run (a resumed download); not counted in the rate.
        every_s: at most one redraw per this many seconds.
        delay_s: print nothing until this many seconds have passed, so quick steps stay silent
            (the final line is printed only if something was).
        stream: where to write (default ``sys.stderr`` at construction).
        now: the clock (monotonic seconds), replaceable in tests.
    """

    def __init__(self, *, what: str, total: float | None = None, unit: str = "items", initial: float = 0,
                 every_s: float = 0.5, delay_s: float = 0.0, stream: TextIO | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.initial = self.done = initial
        self.every_s, self.now = every_s, now
        self.stream = sys.stderr if stream is None else stream
        self.enabled = console_enabled(self.stream)
        self.t0 = now()
        self._next = self.t0 + delay_s
        self._width = 0
        self._shown = self._closed = False
        if delay_s <= 0:
            self._draw(self.line())

    def update(self, n: float = 1) -> None:
        """Count ``n`` more units; redraw if ``every_s`` has passed since the last drawing."""
        self.done += n
        if self.enabled and self.now() >= self._next:
            self._draw(self.line())

    def line(self) -> str:
        """The current progress line (without ``\\r``)."""
        elapsed = self.now() - self.t0
        per_s = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.what}: "]
        if self.total:
            done = amount(self.done, self.unit)
            parts.append(f"{done.split()[0]}/{amount(self.total, self.unit)}  {100 * self.done / self.total:.0f}%")
        else:
            parts.append(amount(self.done, self.unit))
        parts.append(f"  {_rate(per_s, self.unit)}" if per_s > 0 else "")
        if self.total and per_s > 0:
            parts.append(f"  ETA {clock(max(self.total - self.done, 0) / per_s)}")
        elif not self.total:
            parts.append(f"  {clock(elapsed)}")
        return "".join(parts)

    def close(self) -> None:
        """Write the final line (amount, elapsed time, mean rate), if anything was shown."""
        if self._closed:
            return
        self._closed = True
        if not (self.enabled and self._shown):
            return
        elapsed = self.now() - self.t0
        per_s = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        rate = f" ({_rate(per_s, self.unit)})" if per_s > 0 else ""
        self._draw(f"{self.what}: {amount(self.done, self.unit)} in {clock(elapsed)}{rate}", end="\n")

    def abandon(self) -> None:
        """End a drawn line without a final summary (an error follows on a clean line)."""
        if self.enabled and self._shown and not self._closed:
            self.stream.write("\n")
            self.stream.flush()
        self._closed = True

    def _draw(self, text: str, end: str = "") -> None:
        if not self.enabled:
            return
        if not end:  # a line that wraps cannot be redrawn in place: shorten ``what``, keep the numbers
            text = fit(text, _columns(self.stream) - 1)
        self.stream.write("\r" + text.ljust(self._width) + end)
        self.stream.flush()
        self._width = 0 if end else len(text)
        self._shown = True
        self._next = self.now() + self.every_s

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon()


def track(items: Iterable[T], *, what: str, unit: str = "items", total: int | None = None,
          delay_s: float = 0.5, stream: TextIO | None = None) -> Iterator[T]:
    """Yield ``items`` while counting them on a progress line (``total`` defaults to ``len(items)``)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(what=what, total=total, unit=unit, delay_s=delay_s, stream=stream) as bar:
        for item in items:
            yield item
            bar.update(1)


@contextmanager
def stage(what: str, *, stream: TextIO | None = None, now: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """``what ...`` at the start and ``what: done in 0:12`` at the end, for work that reports no progress
    (e.g. SentencePiece training in C++)."""
    out = sys.stderr if stream is None else stream
    enabled, t0 = console_enabled(out), now()
    if enabled:
        out.write(f"{what} ...\n")
        out.flush()
    yield
    if enabled:
        out.write(f"{what}: done in {clock(now() - t0)}\n")
        out.flush()
