"""Progress lines on the data side: rate + ETA + final line on a terminal, silent otherwise; used by
downloads (resume offset counted) and SentencePiece training. Fake TTYs and a fake clock; no network."""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

import pytest

from attnlab_core.progress import Progress, track
from datamodules.download import Resource, fetch
from datamodules.tokenization import train_sentencepiece


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _loud(monkeypatch) -> None:
    for name in ("ATTNLAB_QUIET", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def _run(stream: io.StringIO, *, delay_s: float = 0.0) -> str:
    t = [0.0]
    bar = Progress(what="downloading c.zip", total=10e6, unit="bytes", initial=2e6, stream=stream,
                   delay_s=delay_s, now=lambda: t[0])
    for _ in range(4):
        t[0] += 1.0
        bar.update(1e6)  # 1 MB/s after the 2 MB already there
    bar.close()
    return stream.getvalue()


def test_line_has_amounts_rate_eta_and_a_final_line() -> None:
    out = _run(FakeTTY())
    lines = out.split("\r")
    assert "downloading c.zip: 2.0/10.0 MB  20%" in lines[1]  # drawn at once, resume offset included
    assert "3.0/10.0 MB  30%  1.0 MB/s  ETA 0:07" in out  # (10 - 3) MB at 1 MB/s
    assert lines[-1].rstrip() == "downloading c.zip: 6.0 MB in 0:04 (1.0 MB/s)"  # the final line
    assert out.endswith("\n") and out.count("\n") == 1


def test_redraws_are_throttled() -> None:
    t = [0.0]
    out = FakeTTY()
    bar = Progress(what="x", total=1000, unit="lines", stream=out, every_s=0.5, now=lambda: t[0])
    for _ in range(1000):
        t[0] += 0.001  # 1 s in all: the first line plus two redraws, not 1000
        bar.update(1)
    assert out.getvalue().count("\r") == 3


def test_a_narrow_terminal_shortens_what_and_keeps_the_eta(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")  # a wrapped line could not be redrawn in place
    drawn = _run(FakeTTY()).split("\r")[1:-1]
    assert all(len(line.rstrip()) <= 49 for line in drawn)
    assert drawn[-1].startswith("download...: 6.0/10.0 MB  60%") and drawn[-1].rstrip().endswith("ETA 0:04")


@pytest.mark.parametrize("case", ["not a tty", "ATTNLAB_QUIET=1", "LOCAL_RANK=1", "quick step"])
def test_silent(case: str, monkeypatch) -> None:
    stream = io.StringIO() if case == "not a tty" else FakeTTY()
    if "=" in case:
        monkeypatch.setenv(*case.split("="))
    delay_s = 10.0 if case == "quick step" else 0.0
    assert _run(stream, delay_s=delay_s) == ""
    assert "".join(track(["a", "b"], what="x", stream=stream, delay_s=delay_s)) == "ab"
    assert stream.getvalue() == ""


def test_download_shows_progress_on_a_terminal(http_server, tmp_path: Path, monkeypatch) -> None:
    payload = bytes(range(256)) * 8192  # 2.1 MB
    http_server.files["/corpus.bin"] = payload
    (tmp_path / "corpus.bin.part").write_bytes(payload[:1_000_000])  # resumed: counted from 1.0 MB
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    res = Resource(url=f"{http_server.url}/corpus.bin", checksum="sha256:" + hashlib.sha256(payload).hexdigest())
    assert fetch(res, cache_dir=tmp_path).read_bytes() == payload
    out = sys.stderr.getvalue()
    assert "downloading corpus.bin: 1.0/2.1 MB  48%" in out
    assert "downloading corpus.bin: 2.1 MB in 0:0" in out and out.endswith("\n")


def test_sentencepiece_training_has_a_start_and_an_end_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    corpus = [f"the {w} cat sat on mat {i}" for i, w in enumerate(["big", "red", "old", "small"] * 25)]
    train_sentencepiece(corpus, cache_dir=tmp_path, name="t", model_type="bpe", vocab_size=40)
    lines = sys.stderr.getvalue().split("\n")
    start = "training SentencePiece bpe (40 pieces) for t on 100 sentences"
    assert lines[0].startswith(start) and lines[0].endswith(" ...")
    assert lines[1].startswith(start) and ": done in 0:0" in lines[1]  # (reading 100 sentences: too quick to show)
    assert lines[2:] == [""]
