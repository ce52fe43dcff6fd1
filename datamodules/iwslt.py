"""IWSLT14 de-en prepared as fairseq's ``examples/translation/prepare-iwslt14.sh`` splits it.

From the published ``de-en.tgz`` (WIT3 release 2014-01; TED talk transcripts):

- train: ``train.tags.de-en.{de,en}`` without the metadata lines (``<url>``, ``<talkid>``,
  ``<keywords>``, ``<speaker>``, ``<reviewer``, ``<translator``, ``<doc``, ``</doc>``), with the
  ``<title>`` / ``<description>`` tags removed but their text kept; pairs kept when both sides
  have 1–175 words and neither side has more than 9× the other's words (Moses
  ``clean-corpus-n.perl 1 175``, default ratio 9);
- valid: every 23rd line of that (line numbers 23, 46, ...), removed from train;
- test: the ``<seg>`` lines of IWSLT14.TED.dev2010, IWSLT14.TEDX.dev2012 and IWSLT14.TED.tst2010,
  tst2011, tst2012, concatenated in that order.

Deviations from the script: no Moses tokenization and no BPE (SentencePiece is trained on the
raw text here), so BLEU is SacreBLEU on detokenized text rather than tokenized multi-bleu, and the
length filter counts whitespace words rather than Moses tokens. Text is lowercased, as there.

The WIT3 host that published ``de-en.tgz`` is offline and no checksum of the archive was ever
published, so it is not downloaded: put a copy at ``<data_dir>/downloads/de-en.tgz``.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError
from datamodules.download import extract
from datamodules.tokenization import read_lines

ARCHIVE = "de-en.tgz"
METADATA = ("<url>", "<talkid>", "<keywords>", "<speaker>", "<reviewer", "<translator", "<doc", "</doc>")
TEST_SETS = ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
             "IWSLT14.TED.tst2012")
VALID_EVERY = 23
MAX_WORDS, MAX_RATIO = 175, 9.0
_TAGS = re.compile(r"</?(title|description)>")
_SEG = re.compile(r'^\s*<seg id="?\d+"?>\s*(.*?)\s*</seg>\s*$')


def _train_lines(path: Path) -> list[str]:
    return [_TAGS.sub("", ln).strip().lower() for ln in read_lines(path) if not ln.lstrip().startswith(METADATA)]


def _segments(path: Path) -> list[str]:
    return [m.group(1).replace("\u2019", "'").lower() for ln in read_lines(path) if (m := _SEG.match(ln))]


def _keep(src: str, tgt: str) -> bool:
    n, m = len(src.split()), len(tgt.split())
    return 1 <= n <= MAX_WORDS and 1 <= m <= MAX_WORDS and max(n, m) <= MAX_RATIO * min(n, m)


def prepare_iwslt14(data_dir: Path, *, langs: tuple[str, str] = ("de", "en")) -> Path:
    """Write ``data_dir/iwslt14/{train,valid,test}.{de,en}`` from the archive (once); return that dir."""
    out = data_dir / "iwslt14"
    if all((out / f"{split}.{lang}").is_file() for split in ("train", "valid", "test") for lang in langs):
        return out
    archive = data_dir / "downloads" / ARCHIVE
    if not archive.is_file():
        raise UsageError(
            f"IWSLT14: put the WIT3 2014-01 release de-en.tgz at {archive} (its host is offline and it has no "
            "published checksum, so it is not downloaded), or prepare train|valid|test.{de,en} with fairseq's "
            f"prepare-iwslt14.sh without its BPE step into {out}"
        )
    if sorted(langs) != ["de", "en"]:
        raise UsageError(f"IWSLT14 (de-en.tgz) holds German and English only, not {langs[0]}-{langs[1]}")
    root = extract(archive, data_dir / "iwslt14-raw")
    pair = "de-en"
    sides = [_train_lines(_one(root, f"train.tags.{pair}.{lang}")) for lang in langs]
    if len(sides[0]) != len(sides[1]):
        raise UsageError(f"{archive}: train.tags files differ in length ({len(sides[0])} vs {len(sides[1])} lines "
                         "after removing metadata)")
    train = [p for p in zip(*sides, strict=True) if _keep(*p)]
    splits = {
        "train": [p for i, p in enumerate(train, start=1) if i % VALID_EVERY],
        "valid": [p for i, p in enumerate(train, start=1) if not i % VALID_EVERY],
        "test": list(zip(*([s for name in TEST_SETS for s in _segments(_one(root, f"{name}.{pair}.{lang}.xml"))]
                           for lang in langs), strict=True)),
    }
    for split, pairs in splits.items():
        for side, lang in enumerate(langs):
            atomic_write(out / f"{split}.{lang}", "".join(p[side] + "\n" for p in pairs).encode("utf-8"))
    return out


def _one(root: Path, name: str) -> Path:
    hits = sorted(root.rglob(name))
    if not hits:
        raise UsageError(f"{root}: the IWSLT14 archive has no {name} (unexpected layout)")
    return hits[0]
