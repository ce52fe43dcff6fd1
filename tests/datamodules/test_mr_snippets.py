"""The MR source (VADER's human-rated snippets, read from the vaderSentiment 3.3.2 sdist): the published
layout on a tiny built sdist, the label rule, a split that cannot leak, out-of-domain test sets, one-line
errors through the CLI with nothing created, and a real-data smoke run when the sdist is in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import datamodules.vader_snippets as vader
from attnlab_core.errors import UsageError
from attnlab_run.cli import main
from datamodules.sentiment import SentimentData
from datamodules.vader_snippets import Snippet, mr_split, normalise, polarity_examples, read_domains, vader_splits
from tests.cli.test_bad_input import _error_line
from tests.datamodules.package_fixtures import domain_rows, mr_rows, write_vader_sdist
from tests.datamodules.real_data import mr_data_dir

CONFIG = Path(__file__).parents[2] / "ablations" / "configs" / "mr_lstm_attention.yaml"


def test_reads_every_domain_of_the_published_layout(tmp_path: Path, monkeypatch) -> None:
    sdist = write_vader_sdist(tmp_path, monkeypatch=monkeypatch)
    domains = read_domains(sdist)
    assert {d: len(v) for d, v in domains.items()} == {"mr": 60, "tweets": 12, "nyt": 12, "amazon": 12}
    first = domains["mr"][0]
    assert first == Snippet("1", 1.5, "Snippet 1 is a splendid film’s moment.")  # UTF-8, CRLF stripped
    assert domains["amazon"][2] == Snippet("3_1", 2.0, "amazon text 3 great")


def test_label_is_the_sign_of_the_rating_and_zero_is_dropped() -> None:
    snippets = [Snippet("1", 0.01, "a"), Snippet("2", -0.01, "b"), Snippet("3", 0.0, "c"), Snippet("4", -3.9, "d")]
    assert polarity_examples(snippets) == [("1", ("a", 1)), ("2", ("b", 0)), ("4", ("d", 0))]


def test_repeated_texts_are_kept_once_at_their_first_id() -> None:
    snippets = [Snippet("10", 1.0, "Same  Text."), Snippet("11", 1.0, "other"), Snippet("15", -1.0, "same text.")]
    assert [i for i, _ in polarity_examples(snippets)] == ["10", "11"]


def test_split_rule_is_fixed_by_id() -> None:
    assert [mr_split(str(i)) for i in (10, 20, 5, 15, 1, 9, 10605)] == ["test", "test", "val", "val",
                                                                        "train", "train", "val"]
    with pytest.raises(UsageError, match="not an integer"):
        mr_split("3_1")


def test_splits_are_disjoint_follow_the_ids_and_ignore_the_seed(tmp_path: Path, monkeypatch) -> None:
    write_vader_sdist(tmp_path, monkeypatch=monkeypatch)
    texts = {}
    for seed in (1, 2):
        dm = SentimentData(source="mr", data_dir=str(tmp_path), seed=seed)
        texts[seed] = {s: {t for t, _ in items} for s, items in dm.raw_splits().items()}
    assert texts[1] == texts[2]  # the seed only orders the examples
    train, val, test = texts[1]["train"], texts[1]["val"], texts[1]["test"]
    assert not (train & val or train & test or val & test)
    kept = [(i, r) for i, r, _ in mr_rows() if r != 0]
    assert len(test) == sum(int(i) % 10 == 0 for i, _ in kept) and len(val) == sum(int(i) % 10 == 5 for i, _ in kept)
    assert all(t.startswith(("Snippet 10 ", "Snippet 20 ", "Snippet 30 ", "Snippet 40 ", "Snippet 50 ", "Snippet 60 "))
               for t in test)
    labels = dict(SentimentData(source="mr", data_dir=str(tmp_path)).raw_splits()["train"])
    assert labels["Snippet 1 is a splendid film’s moment."] == 1
    assert labels["Snippet 2 is a dreadful film’s moment."] == 0


def test_a_duplicate_across_ids_lands_in_one_split_only() -> None:
    domains = {"mr": [Snippet("9", 1.0, "twice seen"), Snippet("10", 1.0, "Twice seen"), Snippet("1", -1.0, "x")],
               "tweets": [Snippet("1", 1.0, "TWICE SEEN"), Snippet("2", -1.0, "fresh")]}
    train, val, test = vader_splits(domains, test_domain="mr")
    assert train == [("twice seen", 1), ("x", 0)] and val == [] and test == []
    _, _, tweets = vader_splits(domains, test_domain="tweets")
    assert tweets == [("fresh", 0)]  # a tweet whose text is in the mr training split is not a test example


@pytest.mark.parametrize("domain", ["tweets", "nyt", "amazon"])
def test_out_of_domain_test_sets_keep_the_mr_train_and_val(domain: str, tmp_path: Path, monkeypatch) -> None:
    write_vader_sdist(tmp_path, monkeypatch=monkeypatch)
    base = SentimentData(source="mr", data_dir=str(tmp_path)).raw_splits()
    other = SentimentData(source="mr", data_dir=str(tmp_path), test_domain=domain).raw_splits()
    assert other["train"] == base["train"] and other["val"] == base["val"]
    prefix = {"tweets": "tweet", "nyt": "nyt", "amazon": "amazon"}[domain]
    assert sorted(other["test"]) == sorted((t, y) for _, r, t in domain_rows(prefix) for y in [int(r > 0)])


def test_word_and_sentencepiece_tokenizers_are_cached_like_the_other_corpora(tmp_path: Path, monkeypatch) -> None:
    write_vader_sdist(tmp_path, monkeypatch=monkeypatch)
    dm = SentimentData(source="mr", data_dir=str(tmp_path), tokenizer="bpe", vocab_size=40, batch_size=4)
    dm.prepare_data()
    assert len(list((tmp_path / "tokenizers").glob("sentiment-mr-bpe40-*.model"))) == 1
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.tokens.size(0) == 4 and batch.tokens.max() < 40 and set(batch.labels.tolist()) <= {0, 1}


def test_a_bad_line_names_the_member_and_line(tmp_path: Path, monkeypatch) -> None:
    rows = [*mr_rows(3), ("4", "not-a-number", "text")]  # type: ignore[list-item]
    sdist = write_vader_sdist(tmp_path, {"mr": rows, "tweets": [], "nyt": [], "amazon": []}, monkeypatch=monkeypatch)
    with pytest.raises(UsageError, match=r"movieReviewSnippets_GroundTruth\.txt:4: expected <id><TAB>"):
        read_domains(sdist)


def test_an_sdist_with_another_checksum_is_refused_in_one_line(tmp_path: Path) -> None:
    sdist = write_vader_sdist(tmp_path)  # the expected sha256 stays the published one
    with pytest.raises(UsageError) as err:
        read_domains(sdist)
    assert "is not that of the published vaderSentiment 3.3.2 sdist" in str(err.value)
    assert "pip download --no-deps --no-binary :all: vaderSentiment==3.3.2" in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_names_the_install_step_when_the_sdist_is_absent(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    line = _error_line(capsys, ["fit", "--config", str(CONFIG), f"--data.init_args.data_dir={data}",
                               f"--run.root={tmp_path}/runs"])
    assert line == (f"attnlab: error: source=mr needs {data}/downloads/{vader.SDIST_NAME} (the vaderSentiment 3.3.2 "
                    f"sdist); run: pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d {data}/downloads")
    assert not any(tmp_path.iterdir()), "nothing may be created"


def test_cli_refuses_a_test_domain_the_source_does_not_offer(tmp_path: Path, capsys) -> None:
    config = CONFIG.with_name("sentiment_lstm_attention.yaml")
    line = _error_line(capsys, ["fit", "--config", str(config), "--data.init_args.test_domain=nyt",
                               f"--run.root={tmp_path}/runs"])
    assert line.endswith("--data.init_args.test_domain=nyt is not a test set of source=synthetic (it offers: none)")
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- real data (skips when absent)
def test_real_sdist_counts_and_split_sizes(tmp_path: Path) -> None:
    domains = read_domains(vader.sdist_path(mr_data_dir(tmp_path)))
    assert {d: len(v) for d, v in domains.items()} == {"mr": 10605, "tweets": 4200, "nyt": 5190, "amazon": 3708}
    assert sum(s.rating == 0 for s in domains["mr"]) == 37
    train, val, test = vader_splits(domains, test_domain="mr")
    assert (len(train), len(val), len(test)) == (8455, 1057, 1054)
    assert 0.45 < sum(y for _, y in train) / len(train) < 0.55
    assert not {normalise(t) for t, _ in train} & {normalise(t) for t, _ in val + test}


def test_real_mr_trains_a_few_steps_through_the_cli(tmp_path: Path) -> None:
    data = mr_data_dir(tmp_path)
    main(["fit", "--config", str(CONFIG), f"--data.init_args.data_dir={data}", f"--run.root={tmp_path}/runs",
          "--run.name=mr", "--data.init_args.train_size=160", "--data.init_args.val_size=64", "--trainer.max_epochs=1",
          "--data.init_args.vocab_size=1000",  # 160 snippets have 1,402 distinct words: 9000 would be refused
          "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1"])
    summary = json.loads(next((tmp_path / "runs").glob("*/mr/summary.json")).read_text())
    assert summary["status"] == "finished"
    assert summary["global_step"] == 5 and 0.0 <= summary["metrics"]["val/acc"] <= 1.0
