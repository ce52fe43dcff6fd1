"""The generated translation pair: agreement holds, reorderings happen, alignments are consistent
with the lexicon, the output is a function of the seed, lengths are spread, and the datamodule
serves it offline with closed vocabularies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import datamodules.toy_language as toy
from datamodules.batching import UNK
from datamodules.toy_language import AlignedPair, generate_pairs, source_lexicon, target_lexicon
from datamodules.translation import TranslationData

ARTICLES = {**{v: k for k, v in toy.DEFINITE.items()}, **{v: k for k, v in toy.INDEFINITE.items()},
            **{toy.CONTRACTED + s: k for k, s in toy.SUFFIX.items()}}
NOUN_FORMS = {stem + toy.SUFFIX[(g, n)]: (g, n) for _, _, stem, g in toy.NOUNS for n in ("sg", "pl")}
ADJ_FORMS = {stem + s: k for _, stem in toy.ADJECTIVES for k, s in toy.SUFFIX.items()}
VERBS = toy.TRANSITIVE + toy.INTRANSITIVE + toy.SPEECH
FINITE = {**{stem + toy.PRESENT[n]: n for *_, stem in VERBS for n in ("sg", "pl")},
          **{stem + toy.FUTURE[n]: n for *_, stem in VERBS for n in ("sg", "pl")},
          **{a: n for n, a in toy.AUXILIARY.items()}}
PARTICIPLES = {stem + toy.PARTICIPLE for *_, stem in VERBS}


@pytest.fixture(scope="module")
def pairs() -> list[AlignedPair]:
    return generate_pairs(n=1500, seed=11)


def _segments(words: list[str]) -> list[tuple[str, list[str]]]:
    """Target clauses: (the word that opened it: "", "e" or "ke"; its words up to the next opener or ".")."""
    out, opener, current = [], "", []
    for w in words:
        if w in ("e", "ke", "."):
            out.append((opener, current))
            opener, current = w, []
        else:
            current.append(w)
    return out


def test_articles_and_adjectives_agree_with_their_noun(pairs: list[AlignedPair]) -> None:
    checked = 0
    for p in pairs:
        words = p.tgt.split()
        for j, w in enumerate(words):
            if w not in NOUN_FORMS:
                continue
            assert ARTICLES[words[j - 1]] == NOUN_FORMS[w], p.tgt  # an NP is always Det Noun ...
            k = j + 1
            while k < len(words) and (words[k] in ADJ_FORMS or words[k] in ARTICLES and words[k + 1] in ADJ_FORMS):
                if words[k] in ADJ_FORMS:
                    assert ADJ_FORMS[words[k]] == NOUN_FORMS[w], p.tgt
                    checked += 1
                k += 1
    assert checked > 500


def test_verb_agrees_in_number_with_its_subject(pairs: list[AlignedPair]) -> None:
    checked = Counter()
    for p in pairs:
        for _, clause in _segments(p.tgt.split()):
            subject = next(NOUN_FORMS[w] for w in clause if w in NOUN_FORMS)  # a clause opens with its subject
            verb = next(w for w in clause if w in FINITE)
            assert FINITE[verb] == subject[1], (clause, p.tgt)
            checked[subject[1]] += 1
    assert min(checked.values()) > 300


def test_word_order_changes(pairs: list[AlignedPair]) -> None:
    """Subordinate clauses are verb-final; a main-clause participle closes its clause; adjectives
    follow their noun; and most long sentences have crossing alignment links."""
    subordinate = bracket = 0
    for p in pairs:
        for opener, clause in _segments(p.tgt.split()):
            last = clause[-1]
            if opener == "ke":
                assert last in FINITE or last in PARTICIPLES, clause
                subordinate += 1
            elif any(w in toy.AUXILIARY.values() for w in clause):
                assert last in PARTICIPLES and clause.index(last) > 2, clause
                bracket += 1
        src = p.src.split()
        tgt_of = {i: j for i, j in p.alignment}
        for i, w in enumerate(src):
            if w in dict(toy.ADJECTIVES):
                noun = next(k for k in range(i + 1, len(src)) if src[k] not in dict(toy.ADJECTIVES))
                assert tgt_of[i] > tgt_of[noun], p
    assert subordinate > 500 and bracket > 200
    long = [p for p in pairs if len(p.src.split()) >= 20]
    crossing = [p for p in long if any(i1 < i2 and j1 > j2 for i1, j1 in p.alignment for i2, j2 in p.alignment)]
    assert len(crossing) >= 0.95 * len(long)


def _translates(src: str, tgt: str) -> bool:
    """Whether the lexicon lets source word ``src`` produce (part of) target word ``tgt``."""
    stems = [stem for *forms, stem in VERBS if src in forms]
    stems += [stem for sg, pl, stem, _ in toy.NOUNS if src in (sg, pl)]
    stems += [stem for a, stem in toy.ADJECTIVES if a == src]
    if src == "will":
        stems = [stem for *_, stem in VERBS]
    if any(tgt.startswith(s) for s in stems) or tgt in toy.AUXILIARY.values() and src in {v[2] for v in VERBS}:
        return True
    fixed = {"the": set(toy.DEFINITE.values()), "a": set(toy.INDEFINITE.values()), "some": set(toy.INDEFINITE.values()),
             "that": {"ke"}, "and": {"e"}, ".": {"."}, **{s: {t} for s, t in toy.PREPOSITIONS}}
    contraction = tgt.startswith(toy.CONTRACTED) and src in ("in", "the")
    return tgt in fixed.get(src, set()) or contraction


def test_alignments_cover_both_sides_and_follow_the_lexicon(pairs: list[AlignedPair]) -> None:
    fertility, merged = Counter(), Counter()
    for p in pairs:
        src, tgt = p.src.split(), p.tgt.split()
        assert list(p.alignment) == sorted(set(p.alignment))
        assert {i for i, _ in p.alignment} == set(range(len(src)))
        assert {j for _, j in p.alignment} == set(range(len(tgt)))
        for i, j in p.alignment:
            assert _translates(src[i], tgt[j]), (src[i], tgt[j], p)
        fertility.update(Counter(i for i, _ in p.alignment).values())
        merged.update(Counter(j for _, j in p.alignment).values())
    assert fertility[2] > 500 and max(fertility) >= 3  # past tense: Aux + Participle; polydefinite articles
    assert merged[2] > 500  # "will see" -> one word, "in the" -> one word


def test_lengths_spread_ratio_and_closed_lexicons(pairs: list[AlignedPair]) -> None:
    src_len = [len(p.src.split()) for p in pairs]
    tgt_len = [len(p.tgt.split()) for p in pairs]
    assert min(src_len) >= 4 and max(src_len) <= 40
    buckets = Counter((n - 1) // 5 for n in src_len)
    assert all(buckets[b] >= 0.05 * len(pairs) for b in range(1, 8)), buckets  # 6-10 ... 36-40 all well filled
    assert 1.04 < sum(tgt_len) / sum(src_len) < 1.2
    assert {w for p in pairs for w in p.src.split()} <= set(source_lexicon())
    assert {w for p in pairs for w in p.tgt.split()} <= set(target_lexicon())
    short = generate_pairs(n=200, seed=1, min_words=4, max_words=12)
    assert max(len(p.src.split()) for p in short) <= 12
    with pytest.raises(ValueError, match="min_words"):
        generate_pairs(n=1, seed=0, min_words=3)


def test_deterministic_by_seed() -> None:
    assert generate_pairs(n=40, seed=5) == generate_pairs(n=40, seed=5)
    assert generate_pairs(n=40, seed=5) != generate_pairs(n=40, seed=6)
    assert generate_pairs(n=10, seed=5) == generate_pairs(n=40, seed=5)[:10]


def test_datamodule_serves_the_pair_offline(tmp_path: Path) -> None:
    def make(**kw: object) -> TranslationData:
        args = {"source": "synthetic", "data_dir": str(tmp_path / "data"), "val_size": 30, "test_size": 30,
                "batch_size": 8, "shared_vocab": False}
        return TranslationData(**{**args, **kw})  # type: ignore[arg-type]

    dm = make(train_size=50)
    assert (dm.src_vocab_size, dm.tgt_vocab_size) == (len(source_lexicon()) + 4, len(target_lexicon()) + 4)
    dm.prepare_data()
    dm.setup("fit")
    assert not (tmp_path / "data").exists()  # nothing downloaded, nothing cached
    for split in ("val", "test"):
        for (src, tgt), (text_src, text_tgt), links in zip(dm.datasets[split], dm.raw_splits()[split],
                                                          dm.alignments(split), strict=True):
            assert UNK not in src and UNK not in tgt
            assert len(src) == len(text_src.split()) and max(i for i, _ in links) == len(src) - 1
            assert dm.decode_tokens(tgt) == text_tgt
    bigger = make(train_size=80)
    assert bigger.raw_splits()["val"] == dm.raw_splits()["val"]  # val/test do not depend on train_size
    assert dm.raw_splits()["val"] != dm.raw_splits()["test"]
    assert make(train_size=50, seed=2).raw_splits()["val"] != dm.raw_splits()["val"]
    shared = make(train_size=50, shared_vocab=True)
    assert shared.src_vocab_size == shared.tgt_vocab_size == len(set(source_lexicon()) | set(target_lexicon())) + 4
    batch = next(iter(dm.train_dataloader()))
    assert batch.src.size(0) == 8
