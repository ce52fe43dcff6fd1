"""A tiny SWORD library written here in the published zText layout, so the Bible reader is tested
without the Debian packages: ``mods.d/<name>.conf`` plus ``modules/texts/ztext/<name>/nt.bz{s,v,z}``.

zText with BlockType=BOOK (the SWORD format pysword reads): ``nt.bzz`` is one zlib stream per book;
``nt.bzs`` holds one little-endian (offset, compressed size, uncompressed size) uint32 triple per
stream; ``nt.bzv`` one (stream, start, length) = (uint32, uint32, uint16) record per verse slot. Slots
count a testament heading (2 slots), then per book a book heading, per chapter a chapter heading and
its verses; a slot with length 0 is an absent verse. Only the New Testament is written.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

Ref = tuple[str, int, int]

# Four books of the New Testament: Matthew and Romans are training books, John test, Acts validation.
# Chapter 1 of each, verse by verse: (English, Spanish).
PARALLEL = {
    "Matt": [("the book of the king", "el libro del rey"), ("the king had a son", "el rey tuvo un hijo"),
             ("the son had a brother", "el hijo tuvo un hermano"),
             ("a man went to the city", "un hombre fue a la ciudad"), ("the city was great", "la ciudad era grande"),
             ("the man saw a light", "el hombre vio una luz")],
    "John": [("in the beginning was the word", "en el principio era el verbo"),
             ("the word was with god", "el verbo era con dios"),
             ("all things were made by him", "todas las cosas por él fueron hechas"),
             ("in him was life", "en él estaba la vida"),
             ("the light shines in darkness", "la luz en las tinieblas resplandece")],
    "Acts": [("the former book I made", "el primer tratado hice"), ("he was taken up", "fue recibido arriba"),
             ("he showed himself alive", "se presentó vivo"), ("wait for the promise", "esperasen la promesa")],
    "Rom": [("a servant of the king", "siervo del rey"), ("the promise was made before", "la promesa fue hecha antes"),
            ("concerning his son", "acerca de su hijo"), ("grace to you", "gracia a vosotros")],
}
ENGLISH = {book: [en for en, _ in pairs] for book, pairs in PARALLEL.items()}
SPANISH = {book: [es for _, es in pairs] for book, pairs in PARALLEL.items()}


def verses(texts: dict[str, list[str]]) -> dict[Ref, str]:
    """Chapter 1, verses 1..n of each book."""
    return {(book, 1, i): text for book, lines in texts.items() for i, text in enumerate(lines, 1)}


def _slot(canon_nt: list[tuple], ref: Ref) -> int:
    """The verse slot of ``ref``: 2 testament slots, then per book 1 + chapters + verses slots."""
    book, chapter, verse = ref
    slot = 2
    for _, osis, _, lengths in canon_nt:
        if osis == book:
            return slot + 1 + sum(lengths[: chapter - 1]) + chapter + verse - 1
        slot += 1 + len(lengths) + sum(lengths)
    raise KeyError(book)


def write_module(library: Path, *, name: str, lang: str, texts: dict[Ref, str],
                 versification: str = "KJV") -> None:
    """Write one zText module (New Testament only, one compressed block per book) into ``library``."""
    from pysword.canons import canons  # the versification tables (chapter lengths), data only

    canon_nt = canons[versification.lower()]["nt"]
    data = library / "modules" / "texts" / "ztext" / name.lower()
    data.mkdir(parents=True, exist_ok=True)
    (library / "mods.d").mkdir(exist_ok=True)
    (library / "mods.d" / f"{name.lower()}.conf").write_text(
        f"[{name}]\nDataPath=./modules/texts/ztext/{name.lower()}/\nModDrv=zText\nSourceType=OSIS\n"
        f"Encoding=UTF-8\nCompressType=ZIP\nBlockType=BOOK\nVersification={versification}\nLang={lang}\n"
        f"Version=1.0\n")
    books = list(dict.fromkeys(book for book, _, _ in texts))
    records: dict[int, tuple[int, int, int]] = {}
    blocks, index = [], []
    offset = 0
    for block, book in enumerate(books):
        raw = b""
        for ref, text in texts.items():
            if ref[0] == book:
                encoded = text.encode()
                records[_slot(canon_nt, ref)] = (block, len(raw), len(encoded))
                raw += encoded
        packed = zlib.compress(raw)
        blocks.append(packed)
        index.append(struct.pack("<III", offset, len(packed), len(raw)))
        offset += len(packed)
    slots = max(records) + 1
    (data / "nt.bzz").write_bytes(b"".join(blocks))
    (data / "nt.bzs").write_bytes(b"".join(index))
    (data / "nt.bzv").write_bytes(b"".join(struct.pack("<IIH", *records.get(i, (0, 0, 0))) for i in range(slots)))


def tiny_library(root: Path, *, markup: dict[Ref, str] | None = None) -> Path:
    """``root`` as a SWORD library with the KJV and Reina-Valera module names (en, es) and the WEB's
    (NRSVA versification); ``markup`` replaces English verses with raw OSIS."""
    english = verses(ENGLISH) | (markup or {})
    write_module(root, name="engKJV2006eb", lang="en", texts=english)
    write_module(root, name="spaRV1909eb", lang="es", texts=verses(SPANISH))
    write_module(root, name="engWEB2015eb", lang="en", texts=verses(ENGLISH), versification="NRSVA")
    return root
