"""The questions on real data (issue #27): each verdict on hand-built arm statistics (supported, not shown at
this scale, inconclusive), the data check of ``attnlab findings --real`` (one line, exit 2, nothing created),
its dry run, and the README header that names the data's versions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ablations import real_data
from ablations.catalog import claims_real, questions_real
from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUESTIONS
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.findings import findings_main
from ablations.reports import provenance
from ablations.reports.findings_readme import readme
from ablations.reports.record import QuestionResult
from ablations.verdicts.rules import verdict_word
from ablations.verdicts.stats import stat

SEEDS = (1, 2, 3)
BUCKETS = ("len_001_005", "len_006_010", "len_011_015", "len_016_020", "len_021_025")


def s(*values: float):
    """A Stat over seeds 1..n."""
    return stat(list(values), list(SEEDS[: len(values)]))


def jitter(mean: float, spread: float = 0.002, rot: int = 0) -> tuple[float, float, float]:
    """Three seeds around ``mean``; arms with different ``rot`` differ by seed (noise that does not pair away)."""
    values = (mean - spread, mean, mean + spread)
    return values[rot % 3:] + values[: rot % 3]


def word(verdict: str) -> str:
    return verdict_word(verdict)


# ------------------------------------------------------------------------------------------ bottleneck_bible
def bible_arm(bleu: float, by_len: list[float], counts: list[int] | None = (60, 200, 300, 200, 80),
              spread: float = 0.002, rot: int = 0) -> dict:
    arm = {"test/bleu": s(*jitter(bleu, spread, rot))}
    for i, (key, value) in enumerate(zip(BUCKETS, by_len, strict=True)):
        arm[f"test/bleu_by_len/{key}"] = s(*jitter(value, spread, rot + i))
    for key, n in zip(BUCKETS, counts or [], strict=False):
        arm[f"test/count_by_len/{key}"] = s(n, n, n)
    return arm


def test_bottleneck_bible_supported_when_none_falls_and_additive_stays_flat():
    stats = {("none",): bible_arm(0.12, [0.20, 0.16, 0.11, 0.08, 0.05]),
             ("additive",): bible_arm(0.25, [0.27, 0.26, 0.25, 0.25, 0.24])}
    verdict = claims_real.bottleneck_bible(stats)
    assert word(verdict) == "supported", verdict
    assert "buckets of ≥ 50 verses" in verdict and "the interval decides" in verdict  # n=3: p cannot reach 0.025


def test_bottleneck_bible_not_shown_when_none_does_not_learn_short_verses():
    stats = {("none",): bible_arm(0.02, [0.03, 0.02, 0.01, 0.01, 0.0]),
             ("additive",): bible_arm(0.15, [0.16, 0.15, 0.15, 0.14, 0.14])}
    verdict = claims_real.bottleneck_bible(stats)
    assert word(verdict) == "not shown at this scale", verdict
    assert "cannot be read" in verdict and "0.030" in verdict and "additive there 0.160" in verdict
    assert "additive attention beats none: supported" in verdict, "the measured comparison is still reported"


def test_bottleneck_bible_gate_never_hides_a_wrong_sign():
    """None's shortest bucket is below BLEU 5 (the gate fires) but additive is clearly below none overall: the
    line answers the measured comparison, not "not shown at this scale"."""
    stats = {("none",): bible_arm(0.30, [0.03, 0.30, 0.32, 0.31, 0.30]),
             ("additive",): bible_arm(0.10, [0.16, 0.15, 0.15, 0.14, 0.14])}
    verdict = claims_real.bottleneck_bible(stats)
    assert word(verdict) == "not supported" and "additive attention beats none: not supported" in verdict, verdict
    assert "cannot be read" in verdict, "the gate's reading is still shown"


def test_bottleneck_bible_reads_the_shortest_bucket_of_at_least_50_verses():
    """A tiny first bucket (10 verses) at BLEU 0.3 does not count: the first bucket of >= 50 verses decides."""
    stats = {("none",): bible_arm(0.03, [0.30, 0.03, 0.02, 0.02, 0.01], counts=[10, 200, 300, 200, 80]),
             ("additive",): bible_arm(0.15, [0.16, 0.15, 0.15, 0.14, 0.14], counts=[10, 200, 300, 200, 80])}
    verdict = claims_real.bottleneck_bible(stats)
    assert word(verdict) == "not shown at this scale" and "6-10 tokens" in verdict, verdict
    readable, _ = claims_real.readable(stats, ("none",))
    assert [lo for lo, _, _ in readable] == [6, 11, 16, 21]


def test_bottleneck_bible_inconclusive_within_seed_noise_and_without_bucket_counts():
    stats = {("none",): bible_arm(0.20, [0.22, 0.20, 0.18, 0.17, 0.12], counts=None, spread=0.08),
             ("additive",): bible_arm(0.21, [0.22, 0.21, 0.21, 0.20, 0.19], counts=None, spread=0.08, rot=1)}
    verdict = claims_real.bottleneck_bible(stats)
    assert word(verdict) == "inconclusive", verdict
    assert "verses per bucket not logged" in verdict


# ----------------------------------------------------------------------------------------------- norm_bible
def norm_stats(post_cold: float, post_warm: float, pre_cold: float, spread: float = 0.002) -> dict:
    warm = questions_real.NORM_BIBLE_WARMUP
    return {("post", 0): {"val/bleu": s(*jitter(post_cold, spread))},
            ("post", warm): {"val/bleu": s(*jitter(post_warm, spread, 1))},
            ("pre", 0): {"val/bleu": s(*jitter(pre_cold, spread, 2))},
            ("pre", warm): {"val/bleu": s(*jitter(pre_cold, spread))}}


@pytest.mark.parametrize(("arms", "expected"), [
    ((0.01, 0.15, 0.16), "supported"),
    ((0.01, 0.02, 0.03), "not shown at this scale"),
])
def test_norm_bible(arms, expected):
    verdict = REAL_QUESTIONS["norm_bible"].verdict(norm_stats(*arms))
    assert word(verdict) == expected, verdict


def test_norm_bible_inconclusive_within_seed_noise():
    verdict = REAL_QUESTIONS["norm_bible"].verdict(norm_stats(0.12, 0.13, 0.13, spread=0.05))
    assert word(verdict) == "inconclusive", verdict


# ------------------------------------------------------------------------------------------ positions_bible
def positions_arm(inside: float, beyond: float, spread: float = 0.002, rot: int = 0, far: int | None = None) -> dict:
    """Buckets 1-5 .. 21-25 with a training cap of 15 tokens: three buckets inside, two beyond (``far``: the
    beyond buckets' own seed rotation, so the change from inside to beyond varies by seed)."""
    far = rot if far is None else far
    arm = {"run/max_len": s(15, 15, 15), "test/beyond/bleu_by_len": s(*jitter(beyond, spread, far)),
           "test/bleu": s(*jitter((inside + beyond) / 2, spread, rot))}
    for key, value, r in zip(BUCKETS, [inside] * 3 + [beyond] * 2, [rot] * 3 + [far] * 2, strict=True):
        arm[f"test/bleu_by_len/{key}"] = s(*jitter(value, spread, r))
    return arm


def test_positions_bible_supported_and_ranked():
    stats = {("sinusoidal",): positions_arm(0.20, 0.05), ("learned",): positions_arm(0.205, 0.04),
             ("rope",): positions_arm(0.21, 0.10), ("alibi",): positions_arm(0.19, 0.15)}
    verdict = claims_real.positions_bible(stats)
    assert word(verdict) == "supported", verdict
    ranking = verdict.split("longer than any in training: ", 1)[1]
    assert ranking.index("alibi") < ranking.index("rope") < ranking.index("sinusoidal") < ranking.index("learned")


def test_positions_bible_in_range_reads_only_buckets_inside_the_cap():
    got = claims_real.in_range({("a",): positions_arm(0.2, 0.9)}, ("a",))
    assert got is not None and got.n == 3 and abs(got.mean - 0.2) < 1e-9


def test_positions_bible_not_shown_and_inconclusive():
    swept = REAL_QUESTIONS["positions_bible"].swept
    low = {a: positions_arm(0.02, 0.01) for a in swept}
    assert word(claims_real.positions_bible(low)) == "not shown at this scale"
    noisy = {a: positions_arm(0.20, 0.08, spread=0.06, rot=i, far=i + 1) for i, a in enumerate(swept)}
    line = claims_real.positions_bible(noisy)
    assert word(line) == "not supported", line  # alibi's change equals sinusoidal's seed for seed: |Δ| < SESOI
    assert "learned ≈ sinusoidal in range (±2 BLEU, mean over the buckets inside the training lengths): inconclusive" \
        in line and "straddles chance" in line


# --------------------------------------------------------------------------------------- sentiment_pooling_mr
@pytest.mark.parametrize(("attention", "others", "spread", "expected"), [
    (0.80, 0.74, 0.004, "supported"),
    (0.55, 0.54, 0.004, "not shown at this scale"),
    (0.76, 0.75, 0.05, "inconclusive"),
])
def test_sentiment_pooling_mr(attention, others, spread, expected):
    stats = {(p,): {"val/acc": s(*jitter(attention if p == "attention" else others, spread, i)),
                    "test/acc": s(*jitter(attention if p == "attention" else others, spread, i))}
             for i, p in enumerate(("last", "mean", "max", "attention", "cls"))}
    verdict = REAL_QUESTIONS["sentiment_pooling_mr"].verdict(stats)
    assert word(verdict) == expected, verdict
    assert "held-out movie-review snippets (test/acc): attention" in verdict


# ------------------------------------------------------------------------------------------------ ram_mnist
@pytest.mark.parametrize(("one", "six", "spread", "expected"), [
    (0.45, 0.85, 0.01, "supported"),
    (0.11, 0.15, 0.01, "not shown at this scale"),
    (0.60, 0.62, 0.08, "inconclusive"),
])
def test_ram_mnist(one, six, spread, expected):
    stats = {(1,): {"val/acc": s(*jitter(one, spread))}, (3,): {"val/acc": s(*jitter(one, spread))},
             (6,): {"val/acc": s(*jitter(six, spread, 1)), "test/acc": s(*jitter(six, spread, 1)),
                    "val/glimpses_on_digit": s(0.6, 0.6, 0.6)},
             ("full_view",): {"test/acc": s(*jitter(one, spread))}}
    verdict = REAL_QUESTIONS["ram_mnist"].verdict(stats)
    assert word(verdict) == expected, verdict
    if expected != "not shown at this scale":  # the gate's line alone
        assert "RAM with 6 glimpses beats the same-budget full-view network" in verdict, "the baseline is judged"


# ----------------------------------------------------------------------------------------- lm_positions_web
def lm_stats(good: float, bad: float, at_l: float, spread: float = 0.02) -> dict:
    ctx = questions_real.LM_CONTEXT
    out = {}
    for i, p in enumerate(("none", "alibi", "rope", "sinusoidal", "learned")):
        far = good if p in ("none", "alibi") else bad
        out[(p,)] = {f"test/ppl_by_ctx/ctx_{ctx:05d}": s(*jitter(at_l, spread, i)),
                     f"test/ppl_by_ctx/ctx_{2 * ctx:05d}": s(*jitter((at_l + far) / 2, spread, i)),
                     f"test/ppl_by_ctx/ctx_{4 * ctx:05d}": s(*jitter(far, spread, i))}
    return out


@pytest.mark.parametrize(("good", "bad", "at_l", "spread", "expected"), [
    (6.0, 40.0, 5.8, 0.02, "supported"),
    (30.0, 60.0, 25.0, 0.02, "not shown at this scale"),
    (6.0, 6.1, 5.8, 1.0, "inconclusive"),
])
def test_lm_positions_web(good, bad, at_l, spread, expected):
    verdict = REAL_QUESTIONS["lm_positions_web"].verdict(lm_stats(good, bad, at_l, spread))
    assert word(verdict) == expected, verdict
    assert "perplexity at 4L = 512 characters: " in verdict and "; at 2L = 256: " in verdict


# -------------------------------------------------------------------------------- caption_attention_clipart
@pytest.mark.parametrize(("attend", "none", "cider", "spread", "expected"), [
    (0.08, 0.01, 0.3, 0.002, "supported"),
    (0.08, 0.01, 0.05, 0.002, "not shown at this scale"),  # no arm names stamps: the gate
    (0.05, 0.049, 0.3, 0.03, "not shown at this scale"),  # arms within seed noise of none
    (0.01, 0.08, 0.3, 0.002, "not supported"),
])
def test_caption_attention_clipart(attend, none, cider, spread, expected):
    stats = {(a,): {"test/bleu4": s(*jitter(none if a == "none" else attend, spread, i)),
                    "test/cider_d": s(*jitter(cider, 0.002, i))}
             for i, a in enumerate(("additive", "hard", "none"))}
    verdict = REAL_QUESTIONS["caption_attention_clipart"].verdict(stats)
    assert word(verdict) == expected, verdict
    if expected != "not shown at this scale" or cider > 0.1:
        assert "test CIDEr-D: " in verdict and "localisation (the stamps have no object boxes)" in verdict


# ------------------------------------------------------------------------------------------------ registration
def test_real_questions_are_found_by_name_but_not_run_by_the_synthetic_findings():
    assert not set(REAL_QUESTIONS) & set(QUESTIONS)
    from ablations.runner import load_sweep

    for name, question in REAL_QUESTIONS.items():
        assert question_for(name) is question and question.sweep_path.is_file()
        assert question.claim and question.source and question.full
        command = [str(c) for c in load_sweep(question.sweep_path)["command"]]
        assert f"--run.experiment={name}" in command
        reads_test = any(k.startswith("test/") for k in (question.metric, *question.probes))
        assert ("--run.test_after_fit=true" in command) == reads_test, f"{name}: test after fit iff it reads test/"


def test_findings_real_dry_run_lists_the_real_questions(tmp_path: Path, capsys):
    root = tmp_path / "runs"
    argv = ["--real", "--dry-run", "--seeds", "1", "--root", str(root), "--out", str(tmp_path / "docs")]
    assert findings_main(argv) == 0
    printed = capsys.readouterr().out
    for name in REAL_QUESTIONS:
        assert f"== {name} (" in printed
    assert "== scaling" not in printed and not root.exists() and not (tmp_path / "docs").exists()
    assert findings_main(["--dry-run", "--only", "bottleneck_bible", "--root", str(root)]) == 2
    assert "add --real" in capsys.readouterr().err


@pytest.fixture
def absent_data_question(tmp_path: Path):
    """A real question whose datamodule fails its construction-time check (a source needing a file)."""
    config = tmp_path / "absent.yaml"
    config.write_text(yaml.safe_dump({"data": {"class_path": "datamodules.translation.TranslationData",
                                               "init_args": {"source": "files", "data_dir": "data"}}}))
    sweep = tmp_path / "absent.yaml.sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "absent", "program": "attnlab/cli.py", "method": "grid",
        "parameters": {"seed_everything": {"values": [1, 2, 3]}},
        "command": ["${env}", "${interpreter}", "${program}", "fit", "--config", str(config), "${args}"]}))
    return replace(REAL_QUESTIONS["ram_mnist"], name="absent", sweep=str(sweep))


def test_findings_real_without_data_fails_in_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys,
                                                                         absent_data_question):
    import ablations.findings as findings

    problem = real_data.data_problem(absent_data_question)
    assert problem is not None and problem.startswith("absent: ") and "train_path" in problem
    monkeypatch.setattr(findings, "REAL_QUESTIONS", {"absent": absent_data_question})
    monkeypatch.setattr(findings, "REAL_ORDER", ("absent",))
    root, out = tmp_path / "runs", tmp_path / "docs"
    assert findings_main(["--real", "--root", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnlab findings: error: real data missing: absent: ")
    assert not root.exists() and not out.exists() and not (tmp_path / "data").exists()


def test_data_versions_survive_absent_packages(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(provenance.shutil, "which", lambda _: None)
    assert provenance.debian_version("sword-text-kjv") == "sword-text-kjv: dpkg-query not available"
    assert provenance.python_version("no-such-package-attnlab") == "no-such-package-attnlab: not installed"
    assert provenance.sword_modules(tmp_path) == []
    mods = tmp_path / "lib" / "mods.d"
    mods.mkdir(parents=True)
    (mods / "kjv.conf").write_text("[engKJV2006eb]\nDataPath=./x\nVersion=14.3\n")
    assert provenance.sword_modules(tmp_path / "lib") == ["engKJV2006eb 14.3"]
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "vaderSentiment-3.3.2.tar.gz").write_bytes(b"")
    lines = provenance.data_versions(data_dir=tmp_path)
    assert lines[0].startswith("Debian packages: sword-text-kjv: dpkg-query not available")
    assert "vaderSentiment-3.3.2.tar.gz" in lines[2] and lines[3].startswith("Python packages: pysword")


def test_real_readme_header_names_the_data(monkeypatch):
    monkeypatch.setattr(provenance, "data_versions", lambda data_dir: ["Debian packages: sword-text-kjv 14.3-1"])
    result = QuestionResult(name="ram_mnist", verdict="supported: x", key_numbers="`val/acc`: 6 0.9",
                            report="ram_mnist/report.md", figures=[])
    text = readme([result], command="attnlab findings --real", wall_s=1.0, missing=[REAL_QUESTIONS["norm_bible"]],
                  real=True)
    assert text.startswith("# Findings on real data: ")
    assert "- **Data:** Debian packages: sword-text-kjv 14.3-1" in text and "questions_real.py" in text
    assert "| [ram_mnist](#ram_mnist) |" in text and "| norm_bible |" in text and "| not run | not run |" in text
