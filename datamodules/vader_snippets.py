"""Human-rated sentence snippets of Hutto & Gilbert (2014, VADER), read from the vaderSentiment 3.3.2 sdist.

The source distribution of ``vaderSentiment`` 3.3.2 on PyPI (not its wheel) carries
``additional_resources/hutto_ICWSM_2014.tar.gz``, the ICWSM-14 paper's data: sentence-level snippets,
each with the mean rating of about 20 human raters on a -4..+4 scale, in four domains
(``<id>\\t<mean rating>\\t<text>`` files, UTF-8, CRLF):

- ``mr``: 10,605 Rotten Tomatoes movie-review snippets (the sentences of Pang & Lee's sentence-polarity data);
- ``tweets``: 4,200 tweet-like texts; ``nyt``: 5,190 New York Times editorial sentences;
  ``amazon``: 3,708 Amazon product-review sentences.

One documented step puts the data in place (pip checks the file against PyPI's published hash)::

    pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d data/downloads

The sdist is read where that leaves it, ``<data_dir>/downloads/vaderSentiment-3.3.2.tar.gz``, checked
against its published sha256 and read in memory (nothing is extracted); nothing is ever downloaded
here. Its absence is a one-line :class:`UsageError` naming that command, raised when the datamodule
is built (before any run directory exists).

Labels and cleaning (:func:`polarity_examples`): the class is the sign of the mean rating (1 positive,
0 negative); snippets rated exactly 0 (the raters' mean is neutral: 37 mr, 4 tweets, 244 nyt, 98 amazon)
are dropped, since neither class fits them. Texts that repeat (compared lower-cased, whitespace
collapsed) are kept once, at their first id, so no text can sit in two splits.

Split (:func:`mr_split`, fixed, no seed): a movie-review snippet with integer id ``i`` is test when
``i % 10 == 0``, validation when ``i % 10 == 5``, train otherwise (80 / 10 / 10). The other three
domains are whole out-of-domain test sets (``test_domain``); their texts that also occur in the mr
training split are dropped from them.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, NamedTuple, get_args

from attnlab_core.errors import UsageError
from datamodules.download import file_checksum
from datamodules.sources import SentimentSpec

VaderDomain = Literal["mr", "tweets", "nyt", "amazon"]
"""A domain of the VADER snippets: movie reviews (train/val/test), tweets, NYT editorials, Amazon reviews."""

SDIST_NAME = "vaderSentiment-3.3.2.tar.gz"
SDIST_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
"""sha256 of the sdist as published on PyPI (the file ``pip download`` saves)."""
ARCHIVE_MEMBER = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
DOMAIN_FILES: dict[str, str] = {
    "mr": "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
    "tweets": "hutto_ICWSM_2014/tweets_GroundTruth.txt",
    "nyt": "hutto_ICWSM_2014/nytEditorialSnippets_GroundTruth.txt",
    "amazon": "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt",
}
Example = tuple[str, int]  # (text, class index), as in datamodules.sentiment_sources


class Snippet(NamedTuple):
    """One rated text: its id in its file, the mean human rating (-4..+4) and the text."""

    id: str
    rating: float
    text: str


def sdist_path(data_dir: Path) -> Path:
    """Where ``pip download ... -d <data_dir>/downloads`` leaves the sdist."""
    return Path(data_dir) / "downloads" / SDIST_NAME


def install_step(data_dir: Path) -> str:
    """The one command that puts the sdist where :func:`sdist_path` looks."""
    return f"pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d {Path(data_dir) / 'downloads'}"


def require_sdist(spec: SentimentSpec) -> None:
    """Fail in one line, naming the install step, when the sdist is not in place (checked at construction)."""
    path = sdist_path(spec.data_dir)
    if not path.is_file():
        raise UsageError(f"source=mr needs {path} (the vaderSentiment 3.3.2 sdist); run: {install_step(spec.data_dir)}")


def parse_ground_truth(text: str, where: str) -> list[Snippet]:
    """``<id>\\t<mean rating>\\t<text>`` lines (blank lines skipped) -> snippets; a bad line names ``where:line``."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t", 2)
        try:
            rating = float(fields[1])
        except (IndexError, ValueError):
            raise UsageError(f"{where}:{number}: expected <id><TAB><mean rating><TAB><text>") from None
        if len(fields) < 3 or not fields[2].strip() or not fields[0].strip():
            raise UsageError(f"{where}:{number}: expected <id><TAB><mean rating><TAB><text>")
        out.append(Snippet(fields[0].strip(), rating, fields[2].strip()))
    return out


def _member_bytes(tar: tarfile.TarFile, name: str, where: Path | str) -> bytes:
    try:
        member = tar.extractfile(name)
    except KeyError:
        member = None
    if member is None:
        raise UsageError(f"{where}: has no file {name} (not the vaderSentiment 3.3.2 layout)")
    return member.read()


def read_domains(sdist: Path) -> dict[str, list[Snippet]]:
    """Every domain's snippets from the sdist (checked against :data:`SDIST_SHA256`, read in memory)."""
    actual = file_checksum(sdist, "sha256")
    if actual != SDIST_SHA256:
        raise UsageError(f"{sdist}: sha256 {actual} is not that of the published vaderSentiment 3.3.2 sdist "
                         f"({SDIST_SHA256}); delete it and run: {install_step(sdist.parent.parent)}")
    try:
        with tarfile.open(sdist) as outer:
            inner_bytes = _member_bytes(outer, ARCHIVE_MEMBER, sdist)
        where = f"{sdist}!{ARCHIVE_MEMBER}"
        with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
            files = {d: _member_bytes(inner, name, where) for d, name in DOMAIN_FILES.items()}
    except (tarfile.TarError, gzip.BadGzipFile, EOFError) as err:
        raise UsageError(f"{sdist}: unreadable archive ({err})") from None
    out = {}
    for domain, raw in files.items():
        member = f"{where}!{DOMAIN_FILES[domain]}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UsageError(f"{member}: not valid UTF-8 (byte offset {err.start})") from None
        out[domain] = parse_ground_truth(text, member)
    return out


def normalise(text: str) -> str:
    """The form under which two texts count as the same: lower-cased, whitespace collapsed."""
    return " ".join(text.lower().split())


def polarity_examples(snippets: Iterable[Snippet], *, exclude: Iterable[str] = ()) -> list[tuple[str, Example]]:
    """(id, (text, label)) with label = sign of the rating (1 > 0, 0 < 0); zero ratings and repeats dropped.

    Args:
        snippets: in file order (the first of repeated texts is kept).
        exclude: normalised texts to drop as well (e.g. those of a training split).
    """
    seen, out = set(exclude), []
    for s in snippets:
        key = normalise(s.text)
        if s.rating == 0 or key in seen:
            continue
        seen.add(key)
        out.append((s.id, (s.text, int(s.rating > 0))))
    return out


def mr_split(snippet_id: str) -> Literal["train", "val", "test"]:
    """Fixed split of a movie-review snippet by its integer id: ``% 10 == 0`` test, ``== 5`` val, else train."""
    if not (snippet_id.isascii() and snippet_id.isdigit()):  # int() would also take "3_1" and " 7"
        raise UsageError(f"movie-review snippet id {snippet_id!r} is not an integer")
    rest = int(snippet_id) % 10
    return "test" if rest == 0 else "val" if rest == 5 else "train"


def vader_splits(domains: dict[str, list[Snippet]], *, test_domain: str) -> tuple[list[Example], ...]:
    """(train, val, test): mr split by :func:`mr_split`; test from ``test_domain`` (mr: its own test ids)."""
    if test_domain not in get_args(VaderDomain):
        raise UsageError(f"test_domain must be one of {list(get_args(VaderDomain))}, got {test_domain!r}")
    splits: dict[str, list[Example]] = {"train": [], "val": [], "test": []}
    for snippet_id, example in polarity_examples(domains["mr"]):
        splits[mr_split(snippet_id)].append(example)
    if test_domain != "mr":
        train_texts = {normalise(t) for t, _ in splits["train"]}
        splits["test"] = [ex for _, ex in polarity_examples(domains[test_domain], exclude=train_texts)]
    return splits["train"], splits["val"], splits["test"]


def read_mr(spec: SentimentSpec) -> tuple[list[Example], list[Example], list[Example]]:
    """``SENTIMENT_SOURCES["mr"]`` reader: the spec's data_dir and test_domain -> (train, val, test)."""
    require_sdist(spec)
    domains = read_domains(sdist_path(spec.data_dir))
    return vader_splits(domains, test_domain=spec.test_domain or "mr")
