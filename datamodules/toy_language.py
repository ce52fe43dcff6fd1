"""A generated translation pair with real translation phenomena and gold word alignments (offline).

The source is a small English fragment; the target an invented, Romance/German-like language. Every
sentence pair is drawn from one shared phrase structure, realised once per side, so the gold word
alignment is known exactly. The phenomena are the ones alignment and attention studies look at
(Brown et al. 1993 on fertility and distortion; Bahdanau et al. 2015, Fig. 3 on adjective–noun
inversion; Koehn 2010, ch. 4):

- **word order**: adjectives follow their noun, several in mirror order ("the big red dog" ->
  "lo kano roso grando"); subordinate clauses are verb-final ("that the man sees the dog" ->
  "ke lo omo lo kano videt"); a past-tense main clause puts its participle after the object
  ("the man saw the dog" -> "lo omo ha lo kano vidato"), the German Satzklammer.
- **agreement**: articles and adjectives agree with their noun in gender (m/f, from the lexicon)
  and number; the verb, auxiliary included, agrees with its subject in number.
- **one-to-many**: the past tense "saw" becomes auxiliary + participle ("ha ... vidato", often not
  adjacent); **many-to-one**: "will see" -> "vidira" (synthetic future) and "in the" -> "nelo"
  (preposition-article contraction, which agrees with the noun).
- **polydefinites** (as in Modern Greek): a definite article is repeated before every adjective
  ("the big dog" -> "lo kano lo grando"), one more one-to-many link.
- **length ratio**: the target is longer, about 1.09 : 1 (auxiliaries and repeated articles
  outweigh the merged futures and contractions).

Every sentence ends in ``.`` (aligned to ``.``). Words are lower-case ASCII, so the project's word
tokenizer splits text exactly into these words, and alignment indices are word (= token) positions.
Sentences are generated with source lengths spread evenly over ``[min_words, max_words]`` (clauses
chained by "that" complements and "and"), so long sentences are as common as short ones.

Generation uses one ``random.Random`` per call, seeded by the caller; nothing touches global state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from datamodules.splits import SplitSizes, split_seed

Tense = Literal["present", "past", "future"]
Number = Literal["sg", "pl"]
Alignment = tuple[tuple[int, int], ...]
"""Gold word alignment: sorted (source word index, target word index) links."""

# (source singular, source plural, target stem, gender)
NOUNS = (
    ("dog", "dogs", "kan", "m"), ("cat", "cats", "gat", "m"), ("man", "men", "om", "m"),
    ("woman", "women", "don", "f"), ("house", "houses", "kas", "f"), ("bird", "birds", "ucel", "m"),
    ("tree", "trees", "arbor", "m"), ("car", "cars", "maken", "f"), ("book", "books", "libr", "m"),
    ("child", "children", "nin", "m"), ("girl", "girls", "fant", "f"), ("river", "rivers", "flum", "m"),
    ("city", "cities", "urb", "f"), ("teacher", "teachers", "magistr", "m"), ("letter", "letters", "letr", "f"),
    ("garden", "gardens", "ort", "m"), ("horse", "horses", "kaval", "m"), ("table", "tables", "tabl", "f"),
    ("door", "doors", "pord", "f"), ("friend", "friends", "amik", "m"),
)
ADJECTIVES = (
    ("big", "grand"), ("small", "pikol"), ("red", "ros"), ("old", "vekj"), ("young", "jovn"),
    ("happy", "felic"), ("black", "negr"), ("white", "blank"), ("tall", "alt"), ("quiet", "kalm"),
    ("green", "verd"), ("strange", "stran"),
)
# (base, 3rd singular, past, target stem)
TRANSITIVE = (
    ("see", "sees", "saw", "vid"), ("like", "likes", "liked", "am"), ("find", "finds", "found", "trov"),
    ("follow", "follows", "followed", "sekw"), ("help", "helps", "helped", "jut"), ("call", "calls", "called", "klam"),
    ("watch", "watches", "watched", "gward"), ("carry", "carries", "carried", "trasp"),
)
INTRANSITIVE = (("sleep", "sleeps", "slept", "dorm"), ("run", "runs", "ran", "kur"), ("sing", "sings", "sang", "kant"))
SPEECH = (("say", "says", "said", "dik"), ("think", "thinks", "thought", "pens"), ("know", "knows", "knew", "sap"))
PREPOSITIONS = (("in", "en"), ("with", "kon"), ("near", "apud"))

SUFFIX = {("m", "sg"): "o", ("f", "sg"): "a", ("m", "pl"): "i", ("f", "pl"): "e"}
"""Gender/number ending of target nouns and adjectives (and of the article contraction ``nel-``)."""
DEFINITE = {("m", "sg"): "lo", ("f", "sg"): "la", ("m", "pl"): "li", ("f", "pl"): "le"}
INDEFINITE = {("m", "sg"): "un", ("f", "sg"): "una", ("m", "pl"): "alkuni", ("f", "pl"): "alkune"}
PRESENT = {"sg": "et", "pl": "ent"}
FUTURE = {"sg": "ira", "pl": "iran"}
AUXILIARY = {"sg": "ha", "pl": "han"}
PARTICIPLE = "ato"
CONTRACTED = "nel"  # "in the" -> nel + SUFFIX
TENSES: tuple[Tense, ...] = ("present", "past", "future")


@dataclass
class Phrase:
    """Both sides of one constituent: source words with their atom ids, target words with the atom
    ids they translate (one id: one-to-one; several: many-to-one; an id on several words: one-to-many)."""

    src: list[tuple[str, int]] = field(default_factory=list)
    tgt: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)

    def __add__(self, other: Phrase) -> Phrase:
        return Phrase(self.src + other.src, self.tgt + other.tgt)


@dataclass(frozen=True)
class AlignedPair:
    """One generated sentence pair: texts (space-separated words) and the gold word alignment."""

    src: str
    tgt: str
    alignment: Alignment


class _Atoms:
    """Fresh ids for source words (their final positions are fixed when the sentence is done)."""

    def __init__(self) -> None:
        self.next = 0

    def word(self, text: str) -> tuple[str, int]:
        self.next += 1
        return text, self.next


def _noun_phrase(rng: random.Random, atoms: _Atoms, *, pp: bool) -> tuple[Phrase, Number]:
    """Det (Adj)* Noun [PP]  ->  Det Noun (Adj)* reversed [PP], all agreeing in gender and number; a
    definite article is repeated before each adjective (Greek-style polydefinites: one-to-many)."""
    sg, pl, stem, gender = rng.choice(NOUNS)
    number: Number = rng.choice(("sg", "pl"))
    key = (gender, number)
    definite = rng.random() < 0.6
    det = atoms.word("the" if definite else ("a" if number == "sg" else "some"))
    adjs = [(atoms.word(src), tgt) for src, tgt in rng.sample(ADJECTIVES, rng.choices((0, 1, 2), (5, 4, 2))[0])]
    noun = atoms.word(sg if number == "sg" else pl)
    article = ((DEFINITE if definite else INDEFINITE)[key], (det[1],))
    tgt = [article, (stem + SUFFIX[key], (noun[1],))]
    for a, t in reversed(adjs):
        tgt += [article, (t + SUFFIX[key], (a[1],))] if definite else [(t + SUFFIX[key], (a[1],))]
    phrase = Phrase(src=[det, *(a for a, _ in adjs), noun], tgt=tgt)
    if pp and rng.random() < 0.3:
        phrase = phrase + _prepositional(rng, atoms)
    return phrase, number


def _prepositional(rng: random.Random, atoms: _Atoms) -> Phrase:
    """Prep NP; "in the" contracts to one word that agrees with the noun (many-to-one)."""
    src, tgt = rng.choice(PREPOSITIONS)
    prep = atoms.word(src)
    inner, _ = _noun_phrase(rng, atoms, pp=False)
    det_word, det_ids = inner.tgt[0]
    if src == "in" and inner.src[0][0] == "the":
        ending = next(k for k, v in DEFINITE.items() if v == det_word)
        head = (CONTRACTED + SUFFIX[ending], (prep[1], *det_ids))
        return Phrase([prep, *inner.src], [head, *inner.tgt[1:]])
    return Phrase([prep, *inner.src], [(tgt, (prep[1],)), *inner.tgt])


def _verb(atoms: _Atoms, verb: tuple[str, str, str, str], tense: Tense, number: Number) -> tuple[Phrase, Phrase]:
    """(finite part, non-finite part) of the verb on both sides; the non-finite target part is the
    past participle (empty otherwise). The source verb lives in the finite part."""
    base, third, past, stem = verb
    if tense == "present":
        word = atoms.word(third if number == "sg" else base)
        return Phrase([word], [(stem + PRESENT[number], (word[1],))]), Phrase()
    if tense == "future":
        will, inf = atoms.word("will"), atoms.word(base)
        return Phrase([will, inf], [(stem + FUTURE[number], (will[1], inf[1]))]), Phrase()
    word = atoms.word(past)
    return Phrase([word], [(AUXILIARY[number], (word[1],))]), Phrase([], [(stem + PARTICIPLE, (word[1],))])


def _clause(rng: random.Random, atoms: _Atoms, *, clauses: int, subordinate: bool) -> Phrase:
    """One clause with ``clauses - 1`` clauses embedded below it as "that" complements.

    Source order is always S V O PP [that-clause]. Target order: main clauses S V O PP
    (past: S Aux O PP Participle); subordinate clauses "ke" S O PP V (past: ... Participle Aux).
    The complement clause follows the whole verb cluster on both sides.
    """
    subject, number = _noun_phrase(rng, atoms, pp=True)
    kind = "speech" if clauses > 1 else rng.choices(("transitive", "intransitive"), (4, 1))[0]
    lexicon = {"speech": SPEECH, "transitive": TRANSITIVE, "intransitive": INTRANSITIVE}[kind]
    finite, participle = _verb(atoms, rng.choice(lexicon), rng.choice(TENSES), number)
    obj = _noun_phrase(rng, atoms, pp=True)[0] if kind == "transitive" else Phrase()
    adjunct = _prepositional(rng, atoms) if kind != "speech" and rng.random() < 0.4 else Phrase()
    complement = Phrase()
    if kind == "speech":
        that = atoms.word("that")
        inner = _clause(rng, atoms, clauses=clauses - 1, subordinate=True)
        complement = Phrase([that, *inner.src], [("ke", (that[1],)), *inner.tgt])
    src = subject.src + finite.src + obj.src + adjunct.src + complement.src
    if subordinate:
        tgt = subject.tgt + obj.tgt + adjunct.tgt + participle.tgt + finite.tgt + complement.tgt
    else:
        tgt = subject.tgt + finite.tgt + obj.tgt + adjunct.tgt + participle.tgt + complement.tgt
    return Phrase(src, tgt)


def _sentence(rng: random.Random, clauses: int) -> Phrase:
    """``clauses`` clauses: a main clause with a chain of complements, sometimes "and" another main one."""
    atoms = _Atoms()
    if clauses >= 2 and rng.random() < 0.4:
        first = rng.randint(1, clauses - 1)
        left = _clause(rng, atoms, clauses=first, subordinate=False)
        conj = atoms.word("and")
        right = _clause(rng, atoms, clauses=clauses - first, subordinate=False)
        phrase = left + Phrase([conj], [("e", (conj[1],))]) + right
    else:
        phrase = _clause(rng, atoms, clauses=clauses, subordinate=False)
    stop = atoms.word(".")
    return phrase + Phrase([stop], [(".", (stop[1],))])


def _finish(phrase: Phrase) -> AlignedPair:
    position = {atom: i for i, (_, atom) in enumerate(phrase.src)}
    links = sorted((position[a], j) for j, (_, ids) in enumerate(phrase.tgt) for a in ids)
    return AlignedPair(src=" ".join(w for w, _ in phrase.src), tgt=" ".join(w for w, _ in phrase.tgt),
                       alignment=tuple(links))


WORDS_FIRST_CLAUSE, WORDS_PER_CLAUSE = 4.5, 6.2  # measured mean source length: 4.5 + 6.2 * clauses


def generate_pairs(*, n: int, seed: int, min_words: int = 4, max_words: int = 40) -> list[AlignedPair]:
    """``n`` sentence pairs with source lengths (words, final ``.`` included) in ``[min_words, max_words]``.

    The clause count is uniform over 1..K, K the largest count whose mean length fits ``max_words``;
    lengths within one count vary by about ±5 words, so the mixture covers the range nearly evenly
    and long sentences are as common as short ones. Out-of-range sentences are redrawn.

    Args:
        n: number of pairs. seed: the whole output is a function of (n, seed, min_words, max_words).
        min_words / max_words: source length range, inclusive (min_words >= 4: "the dog sleeps .").
    """
    if not 4 <= min_words <= max_words:
        raise ValueError(f"need 4 <= min_words <= max_words, got {min_words}, {max_words}")
    rng = random.Random(seed)
    most = max(1, int((max_words - WORDS_FIRST_CLAUSE) / WORDS_PER_CLAUSE))
    least = min(most, max(1, round((min_words - WORDS_FIRST_CLAUSE) / WORDS_PER_CLAUSE)))
    out: list[AlignedPair] = []
    while len(out) < n:
        phrase = _sentence(rng, rng.randint(least, most))
        if min_words <= len(phrase.src) <= max_words:
            out.append(_finish(phrase))
    return out


GeneratedSplits = dict[str, list[AlignedPair]]
SPLIT_SIZES = {"train": 12000, "val": 400, "test": 1000}
"""Default split sizes (a GRU with attention learns the pair from 12k sentences in minutes on a CPU)."""


def generate_splits(seed: int, sizes: SplitSizes) -> GeneratedSplits:
    """train / val / test pairs, each split from its own seed (:func:`~datamodules.splits.split_seed`), so
    val and test do not depend on the train size and never share a random stream with it. A size of None
    takes ``SPLIT_SIZES``."""
    return {split: generate_pairs(n=n, seed=split_seed(seed, split))
            for split, n in sizes.or_defaults(SPLIT_SIZES).items()}


def source_lexicon() -> list[str]:
    """Every word the source side can produce, sorted (a closed vocabulary: no UNK ever)."""
    words = {"the", "a", "some", "will", "that", "and", "."}
    words |= {w for sg, pl, _, _ in NOUNS for w in (sg, pl)} | {a for a, _ in ADJECTIVES}
    words |= {w for verb in TRANSITIVE + INTRANSITIVE + SPEECH for w in verb[:3]} | {p for p, _ in PREPOSITIONS}
    return sorted(words)


def target_lexicon() -> list[str]:
    """Every word the target side can produce, sorted."""
    words = {"ke", "e", ".", *DEFINITE.values(), *INDEFINITE.values(), *AUXILIARY.values()}
    words |= {stem + end for _, _, stem, _ in NOUNS for end in SUFFIX.values()}
    words |= {stem + end for _, stem in ADJECTIVES for end in SUFFIX.values()}
    words |= {CONTRACTED + end for end in SUFFIX.values()} | {t for _, t in PREPOSITIONS}
    for *_, stem in TRANSITIVE + INTRANSITIVE + SPEECH:
        words |= {stem + PRESENT[n] for n in PRESENT} | {stem + FUTURE[n] for n in FUTURE} | {stem + PARTICIPLE}
    return sorted(words)
