"""The Bible sources (datamodules/bible.py) on a tiny SWORD library written in the published zText
layout (tests/datamodules/sword_fixture.py), so the real reader (pysword) runs without the Debian
packages; plus one smoke run on the installed modules (``-m slow``), skipped where they are absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab_core.errors import UsageError
from datamodules.bible import (
    BIBLE_MODULES,
    SPLITS,
    SWORD_DEFAULT,
    TEST_BOOKS,
    VAL_BOOKS,
    bible_pairs,
    book_split,
    clean_osis,
    locate_bible,
    read_verses,
)
from datamodules.sources import TranslationSpec
from datamodules.wikitext import TextLM
from tests.datamodules.real_data import needs_real_data, package_problem
from tests.datamodules.sword_fixture import ENGLISH, SPANISH, tiny_library, verses, write_module

CONFIGS = Path(__file__).parents[2] / "ablations" / "configs"
needs_pysword = needs_real_data(package_problem("pysword"))  # the Bible sources read SWORD modules with it

MARKUP = ('<div type="x-milestone" subType="x-preverse" sID="pv1"/><title type="x-heading">A Heading</title>'
          '<q marker="" who="Jesus">\u00b6 <w lemma="strong:G3588">the</w> <w lemma="strong:G935">king</w>'
          '<note placement="foot"><reference type="annotateRef">1:2 </reference>a footnote</note>, had '
          '<transChange type="added">a</transChange><w lemma="strong:G5207">son</w></q> ')


def test_clean_osis_keeps_words_and_canonical_titles_only() -> None:
    assert clean_osis(MARKUP) == "the king, had a son"
    psalm = '<title canonical="true" type="psalm">A Psalm of David.</title> <l level="1"/>LORD, how<l/>are they'
    assert clean_osis(psalm) == "A Psalm of David. LORD, how are they"
    assert clean_osis("God<note>n</note>created &amp; made<note>n</note>.") == "God created & made."
    # a tag inside a word (as in the Reina-Valera and KJV modules) leaves the word whole
    inside = 'preguntándo<transChange type="added">le</transChange>, be give</w>n.'
    assert clean_osis(inside) == "preguntándole, be given."


@needs_pysword
def test_pairs_by_verse_with_markup_stripped(tmp_path: Path) -> None:
    library = tiny_library(tmp_path, markup={("Matt", 1, 2): MARKUP})
    pairs = bible_pairs(library, "es", "en")
    expected = {split: [(SPANISH[b][i], ENGLISH[b][i]) for b in ENGLISH if book_split(b) == split
                        for i in range(len(ENGLISH[b]))] for split in SPLITS}
    expected["train"][1] = (SPANISH["Matt"][1], "the king, had a son")
    assert pairs == expected
    assert [len(pairs[s]) for s in SPLITS] == [10, 4, 5]


@needs_pysword
def test_a_verse_missing_on_one_side_is_dropped(tmp_path: Path) -> None:
    english = verses(ENGLISH)
    del english[("John", 1, 3)]
    english[("Acts", 1, 2)] = "<note>only a note</note>"
    write_module(tmp_path, name="engKJV2006eb", lang="en", texts=english)
    write_module(tmp_path, name="spaRV1909eb", lang="es", texts=verses(SPANISH))
    pairs = bible_pairs(tmp_path, "es", "en")
    assert SPANISH["John"][2] not in [s for s, _ in pairs["test"]] and len(pairs["test"]) == 4
    assert SPANISH["Acts"][1] not in [s for s, _ in pairs["val"]] and len(pairs["val"]) == 3


@needs_pysword
def test_splits_hold_out_whole_books(tmp_path: Path) -> None:
    assert not set(VAL_BOOKS) & set(TEST_BOOKS)
    read = [v for v in read_verses(tiny_library(tmp_path), "en") if v.text]
    books = {split: {v.book for v in read if book_split(v.book) == split} for split in SPLITS}
    assert books == {"train": {"Matt", "Rom"}, "val": {"Acts"}, "test": {"John"}}


@needs_pysword
def test_versifications_must_match_and_codes_come_from_the_table(tmp_path: Path) -> None:
    library = tiny_library(tmp_path)
    with pytest.raises(UsageError, match="number their verses differently"):
        bible_pairs(library, "es", "web")
    with pytest.raises(UsageError, match=f"choose one of: {', '.join(BIBLE_MODULES)}"):
        bible_pairs(library, "de", "en")


@needs_pysword
def test_split_files_are_written_once(tmp_path: Path) -> None:
    spec = TranslationSpec(data_dir=tmp_path / "data", src_lang="es", tgt_lang="en",
                      sword_path=str(tiny_library(tmp_path / "sword")))
    src, tgt = locate_bible(spec, "val")
    assert src.read_text().splitlines() == SPANISH["Acts"] and tgt.read_text().splitlines() == ENGLISH["Acts"]
    stamps = [p.stat().st_mtime_ns for p in src.parent.iterdir()]
    assert len(stamps) == 6 and locate_bible(spec, "test")[1].read_text().splitlines() == ENGLISH["John"]
    assert [p.stat().st_mtime_ns for p in src.parent.iterdir()] == stamps


@needs_pysword
def test_web_language_model_text_is_split_by_books(tmp_path: Path) -> None:
    lm = TextLM(source="web", sword_path=str(tiny_library(tmp_path)), vocab_size=40, context=4)
    texts = lm.texts()
    assert texts["val"].splitlines() == ENGLISH["Acts"] and texts["test"].splitlines() == ENGLISH["John"]
    assert texts["train"].splitlines() == ENGLISH["Matt"] + ENGLISH["Rom"]


def _error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("attnlab: error: "), err
    return lines[0]


@needs_pysword
@pytest.mark.parametrize("config", ["bible_gru_attention", "lm_web"])
def test_absent_modules_name_the_package_and_create_nothing(config: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    line = _error_line(capsys, ["fit", "--config", str(CONFIGS / f"{config}.yaml"), f"--run.root={tmp_path}/runs",
                                f"--data.init_args.sword_path={tmp_path}/empty",
                                f"--data.init_args.data_dir={tmp_path}/data"])
    packages = "sword-text-sparv sword-text-kjv" if config.startswith("bible") else "sword-text-web"
    assert f"apt-get install {packages}" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_absent_pysword_names_the_extra_and_creates_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pysword", None)
    monkeypatch.setitem(sys.modules, "pysword.modules", None)
    line = _error_line(capsys, ["fit", "--config", str(CONFIGS / "bible_gru_attention.yaml"),
                                f"--run.root={tmp_path}/runs", f"--data.init_args.data_dir={tmp_path}/data"])
    assert 'pip install -e ".[real]"' in line
    assert not any(tmp_path.iterdir())


def _installed() -> str | None:
    """Why the real-data smoke run cannot run here, or None."""
    if (problem := package_problem("pysword")) is not None:
        return problem
    confs = SWORD_DEFAULT / "mods.d"
    missing = [m.package for c, m in BIBLE_MODULES.items() if c in ("en", "es")
               if not (confs / f"{m.name}.conf").is_file()]
    return f"no SWORD modules in {SWORD_DEFAULT} (apt-get install {' '.join(missing)})" if missing else None


@pytest.mark.slow  # about a minute on 2 busy cores: reading both modules, SentencePiece, three steps
@needs_real_data(_installed())
def test_real_bible_trains_a_few_steps(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("SWORD_PATH", raising=False)
    main(["fit", "--config", str(CONFIGS / "bible_gru_attention.yaml"), f"--run.root={tmp_path}/runs",
          f"--data.init_args.data_dir={tmp_path}/data", "--trainer.max_steps=3", "--trainer.accelerator=cpu",
          "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false", "--data.init_args.vocab_size=500",
          "--data.init_args.train_size=2000", "--data.init_args.val_size=8", "--data.init_args.test_size=8"])
    assert '"status": "finished"' in next((tmp_path / "runs").glob("*/*/summary.json")).read_text()
    val = next((tmp_path / "data" / "bible").glob("*/val.en")).read_text().splitlines()
    assert val[0].startswith("The former treatise have I made, O Theophilus") and len(val) == 1509
