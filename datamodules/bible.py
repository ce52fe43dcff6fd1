"""Bible translations from SWORD modules as real, offline, public-domain text.

The SWORD project's zText modules are read with ``pysword`` (``pip install -e ".[real]"``) from a SWORD
library: a directory holding ``mods.d/*.conf`` and ``modules/texts/ztext/<module>/``, which is both what the
Debian packages install (``/usr/share/sword``) and what the SWORD project's module zip files unpack to.
The library is ``--data.sword_path``, else ``$SWORD_PATH``, else ``/usr/share/sword``.

Language codes name modules through one table, :data:`BIBLE_MODULES`:

=========  ================  ====================================  ===============  =============
code       module            text                                  Debian package   versification
=========  ================  ====================================  ===============  =============
``en``     engKJV2006eb      King James Version (1769 text)        sword-text-kjv   KJV
``es``     spaRV1909eb       Reina-Valera 1909                     sword-text-sparv KJV
``web``    engWEB2015eb      World English Bible (modern English)  sword-text-web   NRSVA
=========  ================  ====================================  ===============  =============

Translation pairs verses by (book, chapter, verse), so both modules must share one versification: KJV and
Reina-Valera do (31,102 verse slots); the WEB follows NRSVA (other verse boundaries in places, and the
deuterocanon), so it is used for language modelling only (``TextLM(source="web")``).

Markup is stripped to plain text (:func:`clean_osis`): Strong's-number ``<w>`` wrappers, notes and
non-canonical headings go, canonical titles (the Psalm superscriptions, which Reina-Valera keeps in the
verse text) stay. A pair with an empty side is dropped.

Splits hold out **whole books** (never random verses), so no verse, and no chapter of a held-out book,
is seen in training (:data:`VAL_BOOKS`, :data:`TEST_BOOKS`; every other book is training):

- validation: Acts, Galatians, Ephesians, Philippians, Colossians (1,510 KJV verses);
- test: John, 1 Corinthians, James, 1 Peter (1,529 KJV verses).

The synoptic gospels stay together in training (Mark is largely parallel to Matthew and Luke), and
John, with few parallels, is in test.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError
from datamodules.sources import SplitFiles, TranslationSpec
from datamodules.splits import SPLITS, Split

SWORD_DEFAULT = Path("/usr/share/sword")
VAL_BOOKS = ("Acts", "Gal", "Eph", "Phil", "Col")
TEST_BOOKS = ("John", "1Cor", "Jas", "1Pet")
"""Held-out books by OSIS name; every other book of a module is training text."""


@dataclass(frozen=True)
class BibleModule:
    """One SWORD module: its name (the ``[section]`` of its .conf), what it is, where to get it."""

    name: str
    title: str
    package: str


BIBLE_MODULES: dict[str, BibleModule] = {
    "en": BibleModule(name="engKJV2006eb", title="King James Version", package="sword-text-kjv"),
    "es": BibleModule(name="spaRV1909eb", title="Reina-Valera 1909", package="sword-text-sparv"),
    "web": BibleModule(name="engWEB2015eb", title="World English Bible", package="sword-text-web"),
}
"""Language code -> SWORD module (see the module docstring's table)."""


class Verse(NamedTuple):
    """One verse slot of a module: OSIS book name, chapter, verse, plain text ('' when absent)."""

    book: str
    chapter: int
    verse: int
    text: str


def book_split(book: str) -> Split:
    """The split a whole book belongs to (by OSIS name)."""
    return "val" if book in VAL_BOOKS else "test" if book in TEST_BOOKS else "train"


_NOTE = re.compile(r"<note\b[^>]*/>|<note\b.*?</note>", re.S)
_HEADING = re.compile(r'<title\b(?![^>]*canonical="true")[^>]*>.*?</title>', re.S)
_INLINE_NAMES = "w|transChange|divineName|hi|foreign|seg|name|q|reference|rf"
_INLINE = re.compile(rf"</?(?:{_INLINE_NAMES})\b[^>]*>")
_ABUTTING = re.compile(rf"(</(?:{_INLINE_NAMES})>)(?=<(?:{_INLINE_NAMES})\b)")  # two words, no space between
_TAG = re.compile(r"<[^>]*>")
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


def clean_osis(markup: str) -> str:
    """OSIS verse markup -> plain text: notes and non-canonical headings dropped with their content;
    two in-line elements with nothing between them (``</w><w>``) separated; every other tag dropped
    keeping its content (in-line tags such as Strong's ``<w>`` without a trace, structural ones such
    as poetry lines as a space); pilcrows removed, whitespace collapsed, no space before closing
    punctuation (a removed note often sits between a word and its comma)."""
    text = _ABUTTING.sub(r"\1 ", _HEADING.sub(" ", _NOTE.sub(" ", markup)))
    text = _TAG.sub(" ", _INLINE.sub("", text))
    for entity, char in _ENTITIES.items():
        text = text.replace(entity, char)
    text = " ".join(text.replace("\u00b6", " ").split())
    return re.sub(r" ([,.;:!?)\]»”’])", r"\1", text)


def sword_root(option: str | None) -> Path:
    """The SWORD library: ``--data.sword_path``, else ``$SWORD_PATH``, else /usr/share/sword."""
    return Path(option or os.environ.get("SWORD_PATH") or SWORD_DEFAULT)


def _module(code: str) -> BibleModule:
    if code not in BIBLE_MODULES:
        raise UsageError(f"no Bible module for language {code!r}; choose one of: {', '.join(BIBLE_MODULES)}")
    return BIBLE_MODULES[code]


def module_confs(root: Path, codes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The parsed .conf of each language's module; one line naming what to install when pysword or a
    module is absent (raised before anything is created)."""
    modules = [_module(code) for code in codes]
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise UsageError('the Bible sources need the pysword package: pip install -e ".[real]" '
                         '(or pip install "pysword>=0.2.8")') from None
    found = SwordModules(str(root)).parse_modules() if (root / "mods.d").is_dir() else {}
    missing = [m for m in modules if m.name not in found]
    if missing:
        raise UsageError(f"no SWORD module {', '.join(m.name for m in missing)} in {root}: apt-get install "
                         f"{' '.join(m.package for m in missing)} (or point --data.sword_path or SWORD_PATH at "
                         f"a SWORD library: mods.d/ and modules/, as the SWORD project's zip files unpack)")
    return {code: found[m.name] for code, m in zip(codes, modules, strict=True)}


def read_verses(root: Path, code: str) -> list[Verse]:
    """Every verse slot of the language's module in canonical order, markup stripped."""
    from pysword.modules import SwordModules

    library = SwordModules(str(root))
    library.parse_modules()
    bible = library.get_bible_from_module(_module(code).name)
    # pysword decompresses a verse's whole block for every verse it reads; blocks are books, so keep the
    # last two (reading in order then decompresses each block once, not once per verse).
    if hasattr(bible, "_decompressed_text"):
        bible._decompressed_text = functools.lru_cache(maxsize=2)(bible._decompressed_text)
    verses = []
    for books in bible.get_structure().get_books().values():
        for book in books:
            refs = [(c, v) for c, n in enumerate(book.chapter_lengths, 1) for v in range(1, n + 1)]
            texts = list(bible.get_iter(books=book.osis_name, clean=False))
            verses += [Verse(book.osis_name, c, v, clean_osis(t)) for (c, v), t in zip(refs, texts, strict=True)]
    return verses


def bible_pairs(root: Path, src: str, tgt: str) -> dict[Split, list[tuple[str, str]]]:
    """Verse pairs by (book, chapter, verse), split by whole books; pairs with an empty side dropped."""
    confs = module_confs(root, (src, tgt))
    schemes = {code: conf.get("versification", "KJV").upper() for code, conf in confs.items()}
    if schemes[src] != schemes[tgt]:
        raise UsageError(f"{src} ({schemes[src]}) and {tgt} ({schemes[tgt]}) number their verses differently: "
                         f"pair modules of one versification (see datamodules/bible.py)")
    target = {(v.book, v.chapter, v.verse): v.text for v in read_verses(root, tgt)}
    out: dict[Split, list[tuple[str, str]]] = {split: [] for split in SPLITS}
    for v in read_verses(root, src):
        other = target.get((v.book, v.chapter, v.verse), "")
        if v.text and other:
            out[book_split(v.book)].append((v.text, other))
    return out


def _cache_dir(spec: TranslationSpec, root: Path) -> Path:
    """``data_dir/bible/<module>-<version>_<module>-<version>``: a new module release is a new cache."""
    confs = module_confs(root, (spec.src_lang, spec.tgt_lang))
    names = [f"{BIBLE_MODULES[c].name}-{confs[c].get('version', '0')}" for c in (spec.src_lang, spec.tgt_lang)]
    return spec.data_dir / "bible" / "_".join(names)


def check_bible(spec: TranslationSpec) -> None:
    """At construction: pysword and both modules are there (else one line naming what to install)."""
    module_confs(sword_root(spec.sword_path), (spec.src_lang, spec.tgt_lang))


def locate_bible(spec: TranslationSpec, split: Split) -> SplitFiles:
    """The split's ``<split>.<src_lang>`` / ``<split>.<tgt_lang>`` files, written once (atomically) from
    the SWORD modules; later calls only read them."""
    root = sword_root(spec.sword_path)
    directory = _cache_dir(spec, root)
    langs = (spec.src_lang, spec.tgt_lang)
    files = {s: tuple(directory / f"{s}.{lang}" for lang in langs) for s in SPLITS}
    if not all(path.is_file() for pair in files.values() for path in pair):
        for name, pairs in bible_pairs(root, *langs).items():
            for side, path in enumerate(files[name]):
                atomic_write(path, "".join(pair[side] + "\n" for pair in pairs).encode())
    return files[split]  # type: ignore[return-value]
