"""Each ablation question: its sweep file, the axis it varies, the probes worth showing, the finding the
literature leads us to expect, and a verdict over the arms.

The question's name is the sweep's ``name`` and the runs' experiment name, so
``<root>/<name>/<trial>/`` holds one question's runs and the report finds them by name. The sweep file is the
one declaration of the question's arms (its axes' values, ``ablations.catalog.arms``) and of the metric that answers
it (its ``metric``); a new question is its sweep file plus one ``Question`` here (or in
``ablations.catalog.questions_real``) with its verdict. What a ``Question`` is: ``ablations.catalog.question``.
"""

from __future__ import annotations

from ablations.catalog import claims, claims_modern, claims_recurrent
from ablations.catalog.arms import FULL_PRESET, REPO, REST, SWEEPS_DIR, Arms, RankedOnly, sweep_metric, swept_arms  # noqa: F401
from ablations.catalog.plan_records import PLANS
from ablations.catalog.question import (  # noqa: F401 - the Question API, re-exported for the registries' callers
    BASELINE_KEY,
    QUICK_DATA,
    QUICK_TRANSFORMER,
    ArmStats,
    Goal,
    Question,
    Verdict,
    all_beat,
)
from ablations.verdicts.rules import Arm, better, join  # noqa: F401
from ablations.verdicts.stats import Stat  # noqa: F401

# Each quick preset's measurements, dated, per question: docs/findings/preset_history.md.
# Positions must first learn reversal before extrapolation can be compared: 6 epochs (measured: preset_history.md).
QUICK_POSITIONS = ("--trainer.max_epochs=6", "--data.train_size=12000", "--data.val_size=200", "--data.test_size=400",
                   "--trainer.log_every_n_steps=10", "--model.warmup_steps=150")
# Norm: 8 arms x 3 seeds, so shorter trials (~375 steps); its warm-up arm (NORM_WARMUP) fits well inside them,
# and sweeps/norm.yaml's lr 0.005 is where Post-Norm fails without warm-up (preset_history.md).
QUICK_NORM = ("--trainer.max_epochs=3", "--data.train_size=8000", "--data.val_size=200", "--data.test_size=200",
              "--trainer.log_every_n_steps=10", "--trainer.val_check_interval=0.5")
# Adding problem at T = 100 as adding.yaml trains it (lr 0.01): 60k training sequences, ~940 steps (preset_history.md).
QUICK_ADDING = ("--trainer.max_epochs=6", "--data.train_size=10000", "--data.val_size=256",
                "--data.test_size=256", "--trainer.log_every_n_steps=10")
# Recurrent decoders step through time on CPU: short sequences (lengths 3-15: three full exact-match buckets,
# 1-5 / 6-10 / 11-15), 256 validation examples, 20 epochs (1280 steps; measured: preset_history.md).
QUICK_RECURRENT = ("--trainer.max_epochs=20", "--data.train_size=4096", "--data.val_size=256", "--data.test_size=128",
                   "--trainer.log_every_n_steps=5", "--trainer.val_check_interval=0.5", "--model.warmup_steps=10",
                   "--data.min_len=3", "--data.max_len=15",
                   "--data.test_min_len=3", "--data.test_max_len=15", "--data.max_tokens=null")


# The warm-up arm of sweeps/norm.yaml (steps); quick runs are ~375 steps, so it must be well inside them.
NORM_WARMUP = 100


# Transformer presets that learn reversal at CPU scale: ~560 steps (12k examples x 3 epochs), validation
# every half epoch for the curves (steps to target, exposure gap over training; measured: preset_history.md).
QUICK_TF = ("--trainer.max_epochs=3", "--data.train_size=12000", "--data.val_size=200", "--data.test_size=200",
            "--trainer.log_every_n_steps=10", "--trainer.val_check_interval=0.5")
QUICK_TF_WARM = (*QUICK_TF, "--model.warmup_steps=150")
# Scaling compares steps to the target: validating every quarter epoch (~47 steps) instead of every half (~94),
# since at half-epoch resolution sqrt_dk and dk could not be told apart.
QUICK_SCALING = tuple(a.replace("val_check_interval=0.5", "val_check_interval=0.25") for a in QUICK_TF_WARM)
# Forcing: twice the steps, the inverse-sigmoid decay reaching p(gold) = 1/2 at step 140, where the exposure gap
# is largest, and validation every quarter epoch (preset_history.md).
QUICK_FORCING = ("--trainer.max_epochs=6", *QUICK_SCALING[1:], "--model.scheduled_steps=280")

# The figures the runs draw, as W&B image keys (``Question.media``; ``lit_models.callbacks.figures.AttentionFigures``:
# ``attention/<figure>/ex<i>``); the classifier logs ``importance/ex<i>`` for pooling with weights and
# ``val/confusion`` for every arm.
QK_LRS = (0.003, 0.01, 0.03, 0.1, 0.3)  # sweeps/qk_norm_lr.yaml's learning rates, which the verdict reads
QUICK_QK = ("--trainer.max_epochs=3", "--data.train_size=8000", "--data.val_size=200", "--data.test_size=200",
            "--trainer.log_every_n_steps=5", "--model.warmup_steps=30")
QUICK_ROPE = ("--data.val_size=200", "--data.test_size=400", "--trainer.log_every_n_steps=10")  # 4 epochs: the sweep
QUICK_KV = ("--data.val_size=200", "--data.test_size=400", "--trainer.log_every_n_steps=10")  # 8 epochs: the sweep
TRANSFORMER_MAPS = ("attention/cross/ex0", "attention/enc_self/ex0", "attention/dec_self/ex0")
CROSS_MAP = ("attention/cross/ex0",)
POOLING_MEDIA = ("importance/ex0", "val/confusion")

# Both readings of the alignment probe beside its headline (lit_models.callbacks.probes.AlignmentMass): the mass on each
# output token's source at the step that predicts it and at the step fed it; val/align_mass is the larger.
ALIGN_READINGS = ("val/align_mass/predicted", "val/align_mass/fed")

QUESTIONS: dict[str, Question] = {
    q.name: q
    for q in [
        Question(
            name="scaling", plan=PLANS["scaling"], axes=("model.attn_scale",),
            probes=("val/loss", "attn/entropy_first", "train/grad_qk/total", "val/align_mass",
                                     *ALIGN_READINGS, "val/attn_entropy/", "curve/early/train/grad_qk/total",
                                     "curve/mean/val/exact_match", "train/grad_qk/", "train/grad_norm/"),
            expected="At d_k = 128, unscaled dot products saturate the softmax (near one-hot weights, tiny "
                     "gradients) and 1/d_k flattens it; 1/sqrt(d_k) keeps logits at unit variance and learns "
                     "fastest (Vaswani et al. 2017, §3.2.1 footnote 4). Vaswani compare against no scaling only; "
                     "at the quick scale (d_k 128, 564 AdamW steps) 1/d_k learned about as fast as 1/sqrt(d_k) "
                     "(5 seeds), likely because Adam's scale-free steps grow W_q and W_k to undo the extra "
                     "1/sqrt(d_k) during warm-up; the gap should widen with d_k (d_model 512 and 1 head: d_k 512).",
            verdict=claims.scaling, quick=QUICK_SCALING, target=0.5,
            claim="1/sqrt(d_k) keeps the softmax out of saturation and learns fastest",
            source="Vaswani et al. 2017, §3.2.1 (footnote 4)",
            full="attnlab sweep sweeps/scaling.yaml: 1250 steps at d_k 128; add model.d_model 64/512 for the d_k trend",
            shows_at="the full preset (transformer_reverse.yaml, 4 epochs x 20k examples, d_k 128; ~5 min on a GPU)",
            media=TRANSFORMER_MAPS, figures=claims.saturation_figures,
        ),
        Question(
            name="norm", plan=PLANS["norm"], axes=("model.norm", "model.encoder_layers", "model.warmup_steps"),
            probes=("val/loss", "train/grad_norm/"),
            expected="Post-Norm's gradients near the output are large at initialisation, so without warm-up "
                     "deep Post-Norm trains badly or diverges; Pre-Norm trains without warm-up "
                     "(Xiong et al. 2020, §3).",
            verdict=lambda stats, arms=None: claims.norm(stats, arms, warm=NORM_WARMUP),
            ranked_only=(("pre", 2, 0), ("pre", 2, NORM_WARMUP)),
            quick=QUICK_NORM, target=0.5,
            claim="deep Post-Norm needs warm-up, Pre-Norm does not; the need grows with depth",
            source="Xiong et al. 2020, §3 and Fig. 3; Liu et al. 2020",
            full="attnlab sweep sweeps/norm.yaml: 1250 constant-lr steps per trial",
            shows_at="the full preset (4 epochs x 20k examples at constant lr; a GPU, or Xiong et al.'s 6+6 layers on "
                     "IWSLT)",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="positions", plan=PLANS["positions"], axes=("model.positions",),
            probes=("val/exact_match", "val/align_mass", *ALIGN_READINGS,
                                     "test/acc_by_len/", "test/token_acc_by_len/",
                                     "val/attn_entropy/"),
            expected="Without positions a Transformer cannot reverse; learned and sinusoidal positions are equally "
                     "good in range (Vaswani et al. 2017, Table 3 row E); beyond the training lengths the schemes "
                     "rank differently (Press et al. 2022; Kazemnejad et al. 2023).",
            verdict=claims.positions, ranked_only=REST, quick=QUICK_POSITIONS, target=0.5,
            claim="learned ≈ sinusoidal in range; no positions cannot reverse; ranking beyond the training lengths",
            source="Vaswani et al. 2017, Table 3 (E); Press et al. 2022",
            full="attnlab sweep sweeps/positions.yaml: 1250 steps, test lengths 3-24",
            shows_at="the full preset (4 epochs x 20k examples, test lengths to 24)",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="forcing", plan=PLANS["forcing"], axes=("model.forcing",),
            probes=("val/loss", "val/free_running_loss", "val/exposure_gap",
                                     "curve/mean/val/exposure_gap", "curve/mean/val/exact_match",
                                     "val/len_drop/acc_by_len", "val/align_mass", *ALIGN_READINGS, "val/acc_by_len/"),
            expected="Scheduled sampling ends above teacher forcing on the final metric and always sampling "
                     "(student) far below it (Bengio et al. 2015, Table 1). Secondary, the project's own reading of "
                     "the mechanism: teacher forcing shows a gap between free-running and teacher-forced loss "
                     "(exposure bias) that scheduled sampling narrows, and student forcing learns slowest. "
                     "At the quick scale the exposure gap lives in the same "
                     "~300 steps in which the model learns, so a decay fast enough to narrow it there also feeds "
                     "mostly the model's own tokens while it learns: scheduled then learns at student's pace "
                     "(measured at p(gold) = 1/2 by step 140 and by step 210). Longer runs (the full preset) "
                     "separate the two phases.",
            verdict=claims.forcing, quick=QUICK_FORCING, target=0.5,
            claim="scheduled sampling beats teacher forcing on the final metric; always sampling (student) is worst",
            source="Bengio et al. 2015, Table 1",
            full="attnlab sweep sweeps/forcing.yaml: 1250 steps (scheduled_steps 2000 as configured)",
            shows_at="the full preset (4 epochs x 20k examples)",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="heads", plan=PLANS["heads"], axes=("model.heads",),
            probes=("val/loss", "val/align_mass", *ALIGN_READINGS, "val/attn_entropy/"),
            expected="A single head is worse than several at the same width; very narrow heads (d_k = 4) lose "
                     "quality again (Vaswani et al. 2017, Table 3 rows A).",
            verdict=claims.heads, ranked_only=(4,), quick=QUICK_TF_WARM, target=0.5,
            claim="one head is worse than several at equal parameters; very narrow heads worse again",
            source="Vaswani et al. 2017, Table 3 (A)",
            full="attnlab sweep sweeps/heads.yaml: 1250 steps",
            shows_at="the full preset (4 epochs x 20k examples); Vaswani's 0.9 BLEU needs WMT-scale data",
            media=TRANSFORMER_MAPS,
        ),
        Question(
            name="attention_bottleneck", plan=PLANS["attention_bottleneck"], axes=("model.attention",),
            probes=("val/loss", "val/len_drop/acc_by_len", "val/align_mass", *ALIGN_READINGS, "val/acc_by_len/",
                    "val/attn_entropy/"),
            expected="Without attention accuracy falls with sequence length (the fixed-vector bottleneck, Cho "
                     "et al. 2014); soft attention keeps long sequences right (Bahdanau et al. 2015). Secondary, "
                     "the project's own hypothesis: hard attention learns more slowly (REINFORCE variance); Xu et "
                     "al. 2015 report hard ≥ soft.",
            verdict=claims_recurrent.bottleneck, ranked_only=("dot", "general"), quick=QUICK_RECURRENT, target=0.5,
            claim="without attention accuracy falls with length; with soft attention it stays near flat",
            source="Bahdanau et al. 2015, Fig. 2; Cho et al. 2014",
            full="attnlab sweep sweeps/attention_bottleneck.yaml (rnn_reverse.yaml as written)",
            shows_at="the full preset (rnn_reverse.yaml; lengths to 30 make the bottleneck sharper)",
            media=CROSS_MAP,
        ),
        Question(
            name="cells", plan=PLANS["cells"], axes=("model.cell",),
            probes=("val/loss", "val/acc_by_len/", "train/grad_norm/"),
            expected="Gated cells (GRU, LSTM) carry a sequence through the fixed vector far better than the "
                     "Elman RNN, whose gradients vanish over long spans (Bengio et al. 1994; Chung et al. 2014). "
                     "The quick preset's sequences (3-15 tokens) are short enough for an Elman RNN to bridge, so "
                     "at this scale the question measures capacity through the fixed vector more than gradient "
                     "flow; the long-span form of the claim is cells_adding (T = 100) and the full preset "
                     "(lengths 5-50).",
            verdict=claims_recurrent.cells, ranked_only=("lstm_peephole",), quick=QUICK_RECURRENT, target=0.5,
            claim="gated cells carry a sequence through the fixed vector better than the Elman RNN",
            source="Bengio et al. 1994; Chung et al. 2014",
            full="attnlab sweep sweeps/cells.yaml",
            shows_at="the full preset (rnn_reverse.yaml, lengths 5-50), and at T = 100 in cells_adding",
            media=CROSS_MAP,
        ),
        Question(
            name="cells_adding", plan=PLANS["cells_adding"], axes=("model.cell",),
            probes=("val/loss", "train/grad_norm/"),
            expected="Gated cells carry two values across T steps; the Elman RNN stays near the mean predictor "
                     "(MSE ~ 1/6) at T = 100 (Hochreiter & Schmidhuber 1997, experiment 4).",
            verdict=claims_recurrent.cells_adding, ranked_only=("gru", "lstm_peephole"), quick=QUICK_ADDING,
            claim="the LSTM solves the adding problem at T = 100; the Elman RNN stays at the mean predictor",
            source="Hochreiter & Schmidhuber 1997, exp. 4 (Table 7)",
            full="attnlab sweep sweeps/cells_adding.yaml (adding.yaml: lr 0.01, 10 epochs)",
            shows_at="the full preset (adding.yaml: lr 0.01, 10 epochs; LSTM reaches MSE 0.0003 there)",
        ),
        Question(
            name="sentiment_pooling", plan=PLANS["sentiment_pooling"], axes=("model.pooling",),
            probes=("val/loss", "val/f1"),
            expected="When one phrase decides the label and later words distract, additive attention pooling "
                     "finds the phrase while mean and max pooling blur it (Yang et al. 2016; Lin et al. 2017).",
            verdict=claims.sentiment, ranked_only=("last", "cls"),
            quick=("--trainer.max_epochs=2", "--data.train_size=3000", "--data.val_size=256",
                   "--data.test_size=256", "--trainer.log_every_n_steps=5"),
            claim="attention pooling finds the deciding phrase; mean and max pooling blur it",
            source="Yang et al. 2016; Lin et al. 2017",
            full="attnlab sweep sweeps/sentiment_pooling.yaml",
            shows_at="the full preset (sentiment config)",
            media=POOLING_MEDIA,
        ),
        Question(
            name="caption_attention", plan=PLANS["caption_attention"], axes=("model.attention",),
            probes=("val/bleu4", "val/cider_d", "val/loss", "val/localisation", "val/localisation_uniform"),
            expected="A captioner that attends over the feature grid names several objects, in order, better "
                     "than one that sees only the mean feature, and its attention sits on the object each word "
                     "names; hard attention trains more noisily (Xu et al. 2015, §4-5 and Fig. 2-3).",
            verdict=claims_recurrent.caption,
            quick=("--trainer.max_epochs=2", "--data.train_size=2000", "--data.val_size=128",
                   "--data.test_size=128", "--trainer.log_every_n_steps=5"),
            claim="soft and hard attention beat the mean-feature captioner and localise the named object",
            source="Xu et al. 2015, §4-5, Fig. 2-3",
            full="attnlab sweep sweeps/caption_attention.yaml",
            shows_at="the full preset (caption config, 30+ epochs on a GPU)",
            media=("attention/caption_{arm}/ex0",),
        ),
        Question(
            name="bottleneck_translation", plan=PLANS["bottleneck_translation"], axes=("model.attention",),
            probes=("val/bleu", "test/len_drop/bleu_by_len", "test/bleu_by_len/", "val/loss"),
            expected="Without attention an encoder-decoder's BLEU falls as source sentences get longer (the "
                     "fixed-length vector; Cho et al. 2014, Fig. 4); with additive attention it stays nearly "
                     "flat across lengths (Bahdanau et al. 2015, Fig. 2).",
            verdict=claims_recurrent.bottleneck_translation,
            quick=("--trainer.max_epochs=2", "--data.train_size=6000", "--data.val_size=200",
                   "--trainer.log_every_n_steps=10"),
            claim="without attention BLEU falls with source length; additive attention stays near flat",
            source="Cho et al. 2014, Fig. 4; Bahdanau et al. 2015, Fig. 2",
            full="attnlab sweep sweeps/bottleneck_translation.yaml (multi30k_gru_attention.yaml on the generated pair)",
            shows_at="the config as written (multi30k_gru_attention.yaml on the generated pair, 12k pairs)",
            media=CROSS_MAP,
        ),
        Question(
            name="lm_positions", plan=PLANS["lm_positions"], axes=("model.positions",),
            probes=("val/exact_match", "test/beyond/token_acc_by_len", "test/acc_by_len/", "test/token_acc_by_len/"),
            expected="A causal decoder can infer position from its mask alone, so without positions (NoPE) and "
                     "with ALiBi it extrapolates past the training lengths better than with absolute positions "
                     "(sinusoidal, learned); RoPE sits in between (Kazemnejad et al. 2023, §4; Press et al. 2022).",
            verdict=claims.lm_positions, ranked_only=REST,
            quick=("--trainer.max_epochs=3", "--data.train_size=12000", "--data.val_size=200",
                   "--data.test_size=400", "--trainer.log_every_n_steps=10", "--model.warmup_steps=150"),
            claim="decoder-only: NoPE and ALiBi extrapolate past the training length better than absolute positions",
            source="Kazemnejad et al. 2023; Press et al. 2022, Table 12",
            full="attnlab sweep sweeps/lm_positions.yaml (lm_reverse.yaml as written)",
            shows_at="the full preset (lm_reverse.yaml, 6 epochs; ~940 steps pass 0.95 in range)",
            media=("attention/self/ex0",),
        ),
        Question(
            name="qk_norm_lr", plan=PLANS["qk_norm_lr"], axes=("model.qk_norm", "model.lr"),
            probes=("val/loss", "train/max_logit", "val/attn_entropy/", "train/loss"),
            expected="Without QK-norm the final loss degrades at the high learning rates as the largest attention "
                     "logit grows and the softmax saturates; with QK-norm the loss stays flat over the sweep "
                     "(Wortsman et al. 2023, §3.1, Fig. 1). The scaling question's d_k arm is the same mechanism "
                     "from the other side: there the logits' scale is set by 1/sqrt(d_k), here it is bounded by "
                     "normalising q and k (|logit| <= scale x d_k x gains).",
            verdict=lambda stats, arms=None: claims_modern.qk_norm_lr(stats, arms, lrs=QK_LRS),
            quick=QUICK_QK,
            claim="QK-norm makes the final loss less sensitive to the learning rate; without it logits grow",
            source="Wortsman et al. 2023, §3.1 and Fig. 1; Dehghani et al. 2023, §3.1.1",
            full="attnlab sweep sweeps/qk_norm_lr.yaml (lm_reverse.yaml as written: 4 epochs of 20k)",
            shows_at="the full preset (lm_reverse.yaml, 4 epochs x 20k examples; wider models show it at lower lr)",
            media=("attention/self/ex0",),
        ),
        Question(
            name="kv_heads", plan=PLANS["kv_heads"], axes=("model.kv_heads",),
            probes=("val/token_acc", "test/exact_match", "test/kv_cache_bytes_per_token", "test/decode_tokens_per_s",
                    "run/parameters"),
            expected="At equal parameters, grouped-query attention (2 of 8 key/value heads) recalls about as well "
                     "as multi-head attention while its KV cache is a quarter of MHA's, close to multi-query's "
                     "eighth (Ainslie et al. 2023, Table 1, Fig. 3).",
            verdict=claims_modern.kv_heads, quick=QUICK_KV,
            claim="GQA comes close to MHA quality at a KV-cache cost close to MQA's",
            source="Ainslie et al. 2023, §1, Table 1, Fig. 3; Shazeer 2019",
            full="attnlab sweep sweeps/kv_heads.yaml (lm_reverse.yaml, 8 epochs x 20k examples of recall)",
            shows_at="the quick preset (8 epochs x 20k examples of recall, 2-8 pairs; the full one evaluates on more)",
            media=("attention/self/ex0",),
        ),
        Question(
            name="rope_reverse", plan=PLANS["rope_reverse"], axes=("model.rope_scaling", "data.finetune_steps"),
            verdict=claims_modern.rope_reverse, ranked_only=REST, quick=QUICK_ROPE,
            claim="decoder-only reversal: RoPE scaling keeps the answer's perplexity rise from L to 4L small where "
                  "plain RoPE's grows, without fine-tuning and, for linear interpolation, after a short fine-tune",
            source="Chen et al. 2023, §3, Tables 1 and 3; Peng et al. 2023, §3",
            probes=(*claims_modern.REVERSE_AT.values(), "test/token_acc_by_len/", "val/exact_match"),
            expected="The synthetic half of rope_scaling: a RoPE decoder learns to reverse prompts of 1-10 tokens "
                     "(so L = 21 positions) and is tested on prompts up to 40. Without scaling the answer's "
                     "perplexity climbs past L; evaluated with linear interpolation, the NTK-aware base or YaRN at "
                     "s = 4 it climbs less, and after a fine-tune of the last "
                     f"{claims_modern.REVERSE_FINETUNE} steps on prompts up to 40 (linear) less again (Chen et al. "
                     "2023, Tables 1 and 3; Peng et al. 2023). The rise is judged, never the perplexity itself.",
            full="attnlab sweep sweeps/rope_reverse.yaml (lm_reverse.yaml, 4 epochs x 20k examples, one validation)",
            shows_at="the quick preset (4 epochs x 20k examples; the full one evaluates on more)",
            media=("attention/self/ex0",),
        ),
    ]
}

ORDER = tuple(QUESTIONS)  # the four questions the suite is named for first, then the rest (cheapest first)
