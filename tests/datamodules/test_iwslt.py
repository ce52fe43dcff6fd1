"""IWSLT14 de-en from an archive in the WIT3 layout, split the way fairseq's prepare-iwslt14.sh does."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from attnlab_core.errors import UsageError
from datamodules.iwslt import TEST_SETS, VALID_EVERY
from datamodules.translation import TranslationData

TRAIN_HEADER = {
    "de": ["<url>http://www.ted.com/talks/x.html</url>", "<keywords>talks</keywords>", "<speaker>A B</speaker>",
           "<talkid>1</talkid>", "<title>Der Titel</title>", "<description>Eine Beschreibung</description>"],
    "en": ["<url>http://www.ted.com/talks/x.html</url>", "<keywords>talks</keywords>", "<speaker>A B</speaker>",
           "<talkid>1</talkid>", "<title>The Title</title>", "<description>A description</description>"],
}


def _xml(name: str, lang: str) -> str:
    segs = "".join(f'<seg id="{i}"> {name} satz {i} {lang} </seg>\n' for i in (1, 2))
    return f'<mteval>\n<srcset setid="{name}" srclang="{lang}">\n<doc docid="1">\n{segs}</doc>\n</srcset>\n</mteval>\n'


def _archive(path: Path) -> list[tuple[str, str]]:
    """A de-en.tgz like WIT3's: de-en/train.tags.de-en.{de,en} and the test-set XML files."""
    body = [(f"Satz Nummer {i} .", f"Sentence number {i} .") for i in range(1, 50)]
    body.append(("zu " * 200, "too " * 200))  # > 175 words: dropped by the length filter
    files = {f"de-en/train.tags.de-en.{lang}": "\n".join(TRAIN_HEADER[lang] + [p[k] for p in body]) + "\n"
             for k, lang in enumerate(("de", "en"))}
    files.update({f"de-en/{name}.de-en.{lang}.xml": _xml(name, lang) for name in TEST_SETS for lang in ("de", "en")})
    path.parent.mkdir(parents=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return [("der titel", "the title"), ("eine beschreibung", "a description")] + [
        (s.lower(), t.lower()) for s, t in body[:-1]]


def test_iwslt14_is_split_like_fairseq(tmp_path: Path) -> None:
    kept = _archive(tmp_path / "downloads" / "de-en.tgz")
    dm = TranslationData(source="iwslt14", data_dir=str(tmp_path), tokenizer="word", vocab_size=60, batch_size=4)
    dm.prepare_data()  # 60 ids: the archive's training pairs have 60 distinct words (64 ids)
    out = tmp_path / "iwslt14"
    read = {f: (out / f).read_text().splitlines() for f in ("train.de", "train.en", "valid.de", "test.en")}
    valid = [p for i, p in enumerate(kept, start=1) if i % VALID_EVERY == 0]
    assert read["valid.de"] == [s for s, _ in valid] and len(valid) == 2
    assert list(zip(read["train.de"], read["train.en"], strict=True)) == [p for p in kept if p not in valid]
    assert read["test.en"][:2] == ["iwslt14.ted.dev2010 satz 1 en", "iwslt14.ted.dev2010 satz 2 en"]
    assert len(read["test.en"]) == 2 * len(TEST_SETS) and read["test.en"][-1].startswith("iwslt14.ted.tst2012")
    dm.setup("fit")
    assert len(dm.datasets["val"]) == 2


def test_iwslt14_without_the_archive_says_where_to_put_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=rf"put the WIT3 2014-01 release de-en.tgz at {tmp_path}/downloads"):
        TranslationData(source="iwslt14", data_dir=str(tmp_path), tokenizer="word", vocab_size=80).prepare_data()
