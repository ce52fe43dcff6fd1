"""Turn benchmark results into the printed table and the goal verdicts of issue #8."""

from __future__ import annotations

from benchmarks.answer_time import answer_table
from benchmarks.gpu_question import question_table

TRAIN_RATIO_GOAL = 1.2
UTILISATION_GOAL = 0.5
BF16_SPEEDUP_GOAL = 2.5
DECODE_RATIO_GOAL = 2.0
LINEAR_EXPONENT_MAX = 1.25


def _index(rows: list[dict], *keys: str) -> dict[tuple, dict]:
    return {tuple(r[k] for k in keys): r for r in rows}


def training_goals(rows: list[dict]) -> list[dict]:
    """attnlab vs the faster peer per (size, precision); base fp32 utilisation; bf16 / fp32 speed-up."""
    goals, idx = [], _index(rows, "size", "precision", "system")
    for size, precision in dict.fromkeys((r["size"], r["precision"]) for r in rows):
        ours = idx[(size, precision, "attnlab")]["tokens_per_s"]
        peers = {s: idx[(size, precision, s)]["tokens_per_s"] for s in ("torch", "marian")
                 if (size, precision, s) in idx}
        if peers:
            best = max(peers, key=peers.get)
            ratio = ours / peers[best]
            goals.append({"goal": f"train {size} {precision}: attnlab >= {TRAIN_RATIO_GOAL}x faster peer ({best})",
                          "value": ratio, "met": ratio >= TRAIN_RATIO_GOAL})
        if precision == "fp32" and size == "base":
            util = idx[(size, precision, "attnlab")]["utilisation"]
            goals.append({"goal": f"train base fp32 utilisation >= {UTILISATION_GOAL:.0%} of fp32 ceiling",
                          "value": util, "met": util >= UTILISATION_GOAL})
        if precision.startswith("bf16") and (size, "fp32", "attnlab") in idx:
            speed = ours / idx[(size, "fp32", "attnlab")]["tokens_per_s"]
            label = "bf16-mixed" if precision == "bf16" else precision
            goals.append({"goal": f"train {size}: {label} >= {BF16_SPEEDUP_GOAL}x our fp32",
                          "value": speed, "met": speed >= BF16_SPEEDUP_GOAL})
    return goals


def decoding_goals(rows: list[dict]) -> list[dict]:
    """attnlab decoding tokens/s >= 2x Marian.generate per (size, beam)."""
    goals, idx = [], _index(rows, "size", "beam", "system")
    for size, beam in dict.fromkeys((r["size"], r["beam"]) for r in rows):
        if (size, beam, "marian") in idx:
            ratio = idx[(size, beam, "attnlab")]["tokens_per_s"] / idx[(size, beam, "marian")]["tokens_per_s"]
            goals.append({"goal": f"decode {size} beam {beam}: attnlab >= {DECODE_RATIO_GOAL}x Marian.generate",
                          "value": ratio, "met": ratio >= DECODE_RATIO_GOAL})
    return goals


def compile_goals(rows: list[dict]) -> list[dict]:
    """torch.compile is worth offering where it beats eager per call (its break-even is in the table)."""
    return [{"goal": f"torch.compile {r['kind']} {r['size']} {r['system']}: faster than eager "
                     f"(break-even: {_steps(r['break_even'], ' calls')})",
             "value": r["speedup"], "met": r["speedup"] > 1.0}
            for r in rows if r["mode"] == "compiled"]


def _steps(n: float, unit: str = "") -> str:
    return "never" if n == float("inf") else f"{n:,.0f}{unit}"


def memory_goal(fit: dict) -> list[dict]:
    """SDPA attention memory grows linearly: log-log slope of peak memory vs length <= 1.25."""
    e = fit.get("exponent", float("nan"))
    return [{"goal": "SDPA attention memory linear in length (log-log slope <= 1.25)", "value": e,
             "met": e == e and e <= LINEAR_EXPONENT_MAX}]


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def training_table(rows: list[dict]) -> str:
    idx = _index(rows, "size", "precision", "system")
    out = []
    for r in rows:
        ours = idx[(r["size"], r["precision"], "attnlab")]["tokens_per_s"]
        out.append([r["size"], r["precision"], r["system"], f"{r['tokens_per_s']:,.0f}", f"{r['step_s'] * 1e3:.0f}",
                    f"{r['achieved_gflops']:.1f}", f"{r['utilisation']:.1%}", f"{ours / r['tokens_per_s']:.2f}"])
    return _table(["size", "prec", "system", "tok/s", "ms/step", "GFLOP/s", "util", "attnlab÷this"], out)


def decoding_table(rows: list[dict]) -> str:
    idx = _index(rows, "size", "beam", "system")
    out = [[r["size"], str(r["beam"]), r["system"], f"{r['tokens_per_s']:,.0f}", f"{r['decode_s'] * 1e3:.0f}",
            str(r["out_len"]), f"{idx[(r['size'], r['beam'], 'attnlab')]['tokens_per_s'] / r['tokens_per_s']:.2f}"]
           for r in rows]
    return _table(["size", "beam", "system", "tok/s", "ms/batch", "out len", "attnlab÷this"], out)


def compile_table(rows: list[dict]) -> str:
    out = [[r["kind"], r["size"], r["system"], r["mode"], f"{r['tokens_per_s']:,.0f}", f"{r['call_s'] * 1e3:.0f}",
            f"{r['speedup']:.2f}", *_compile_cells(r)] for r in rows]
    return _table(["kind", "size", "system", "mode", "tok/s", "ms/call", "speed-up", "compile s cold / warm",
                   "break-even cold / warm", "graphs"], out)


def _compile_cells(r: dict) -> list[str]:
    if r["mode"] != "compiled":
        return ["-", "-", "-"]
    return [f"{r['compile_s']:.1f} / {r['warm_compile_s']:.1f}",
            f"{_steps(r['break_even'])} / {_steps(r['warm_break_even'])}", str(r["graphs"])]


def optimizer_table(rows: list[dict]) -> str:
    out = [[r["size"], f"{r['params_m']:.2f} M", r["impl"], f"{r['step_s'] * 1e3:.1f}", f"{r['speedup']:.2f}"]
           for r in rows]
    return _table(["size", "params", "AdamW", "ms/step", "speed-up"], out)


def attention_table(rows: list[dict]) -> str:
    out = [[str(r["length"]), r["path"], f"{r['peak_mib']:.0f}" if "peak_mib" in r else "-",
            f"{r['time_s'] * 1e3:.0f}" if "time_s" in r else "-", r.get("skipped", r.get("error", ""))]
           for r in rows]
    return _table(["T", "path", "peak MiB", "fwd+bwd ms", "note"], out)


def vmap_table(rows: list[dict]) -> str:
    out = [[str(r["seeds"]), str(r["batch"]), str(r["heads"]), str(r["length"]), str(r["d_head"]),
            f"{r['vmap_ms']:.2f}", f"{r['folded_ms']:.2f}", f"{r['ratio']:.2f}"] for r in rows]
    return _table(["seeds", "B", "H", "T", "d_head", "vmap ms", "folded ms", "vmap÷folded"], out)


def goals_table(goals: list[dict]) -> str:
    out = [[g["goal"], f"{g['value']:.2f}", "met" if g["met"] else "MISSED"] for g in goals]
    return _table(["goal", "value", "verdict"], out)


def profile_table(ops: list[dict]) -> str:
    out = [[o["op"][:60], f"{o['self_ms']:.1f}", f"{o['share']:.0%}", str(o["count"])] for o in ops]
    return _table(["op", "self ms", "share", "calls"], out)


def time_to_answer_table(trials: list[dict]) -> str:
    """Per trial: seconds and share of wall time for each row of ``benchmarks.trial_time.ROWS``."""
    names = [f"{t['question']} {t.get('start', 'cold')} ({t['steps']} steps)" for t in trials]
    rows = [[row, *(f"{t['rows'][row]:.1f} s ({t['rows'][row] / t['wall_s']:.0%})" for t in trials)]
            for row in trials[0]["rows"]]
    rows.append(["wall", *(f"{t['wall_s']:.1f} s" for t in trials)])
    notes = [f"{t['question']}: start-up until the Trainer's profiler was built (imports, parsing, model) "
             f"{t['until_profiler_s']:.1f} s; largest actions: "
             + ", ".join(f"{name} {sec:.1f} s" for name, sec in t["top_actions"][:4]) for t in trials]
    return "\n\n".join([_table(["part", *names], rows), *notes])


def render(results: dict) -> str:
    """The full plain-text (Markdown) report of one run."""
    m = results["machine"]
    parts = [f"machine: {m['cpu']} ({m['cores']} cores, {m.get('cpu_capability', '?')}, native bf16 GEMM: "
             f"{m.get('native_bf16_gemm', '?')}) | {m['threads']} threads | torch {m['torch']} | "
             f"transformers {m['transformers']}"]
    if "ceiling" in results:
        c = results["ceiling"]
        parts.append(f"matmul ceiling ({c['n']}²): fp32 {c['fp32']:.1f} GFLOP/s, bf16 {c['bf16']:.2f} GFLOP/s")
    sections = [("training", training_table), ("optimizer", optimizer_table), ("compile", compile_table),
                ("decoding", decoding_table), ("attention", attention_table)]
    for key, fn in sections:
        if results.get(key):
            parts.append(f"### {key}\n\n{fn(results[key])}")
    for skip in results.get("training_skipped", []):
        parts.append(f"training {skip['size']} {skip['precision']} skipped: ~{skip['estimated_step_s']:.0f} s per "
                     f"step at this machine's {skip['precision']} matmul ceiling")
    if "attention_fit" in results:
        slopes = {p: results.get(f"attention_fit{s}", {}).get("exponent", float("nan"))
                  for p, s in (("sdpa", ""), ("explicit", "_explicit"))}
        parts.append("memory growth exponent (log-log slope; 1 = linear, 2 = quadratic): "
                     + ", ".join(f"{p} {e:.2f}" for p, e in slopes.items()))
    if results.get("attention_vmap"):
        parts.append("### attention of stacked seeds (causal SDPA fwd+bwd, 1 thread): vmap against the seeds folded "
                     f"into the batch\n\n{vmap_table(results['attention_vmap'])}")
    if "recurrent" in results:
        r = results["recurrent"]
        parts.append(f"### recurrent step (B={r['batch']}, H={r['hidden']}, V={r['vocab']})\n\n"
                     f"attnlab step {r['attnlab_us']:.0f} µs, bare LSTMCell decoder {r['bare_us']:.0f} µs, "
                     f"cell only {r['cell_only_us']:.0f} µs: overhead {r['overhead']:.2f}x")
    if results.get("recurrent_training"):
        r = results["recurrent_training"]
        parts.append(f"### recurrent training step (teacher forcing, B={r[0]['batch']}, S={r[0]['src_len']}, "
                     f"T={r[0]['tgt_len']}, V={r[0]['vocab']}, width {r[0]['width']})\n\n"
                     + ", ".join(f"{row['attention']} {row['ms']:.0f} ms" for row in r))
    if "gpu" in results:
        gpu = dict(results["gpu"])
        question = gpu.pop("question", None)
        parts.append(f"### gpu\n\n{gpu}")
        if question:
            parts.append(f"### question on one GPU (quick preset, every seed, N trials at once)\n\n"
                         f"{question_table(question)}")
    if results.get("answer"):
        parts.append("### time to answer, before (cold: a fresh interpreter a trial) and after (warm: the runner's "
                     f"default)\n\n{answer_table(results['answer'])}")
    if results.get("time_to_answer"):
        threads = results["time_to_answer"][0].get("threads", "?")
        parts.append(f"### time to answer (one quick trial per question: real CLI subprocess, {threads} thread as "
                     f"quick sweeps run it)\n\n"
                     f"{time_to_answer_table(results['time_to_answer'])}")
    if results.get("goals"):
        parts.append(f"### goals\n\n{goals_table(results['goals'])}")
    for name, ops in results.get("profiles", {}).items():
        parts.append(f"### profile: {name}\n\n{profile_table(ops)}")
    return "\n\n".join(parts)
