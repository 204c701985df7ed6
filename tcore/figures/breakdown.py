"""Where a step's time goes: device time by kind of work, and the device idle in between, from a profiler trace.

The worker profiles a few steady-state steps of each variant back to back (as the timed blocks run
them) and hands the Chrome trace that torch.profiler exports to `analyze`. On a GPU the "device" is
the stream of kernels: each kernel's time goes to a category (matmuls and convolutions, attention,
pointwise work, copies, the optimizer, other) and the time between kernels, when the GPU waits on
Python and launches, is idle. On the CPU the host ops are the device: each op's self time goes to
its category, and time spent outside any op (Python, Dynamo's guards, the dispatcher) is the idle.
Either way the categories plus idle add up to the profiled step time.

Pure functions over lists of trace events, so they are tested on the CPU with synthetic events.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

# The marks the worker puts in the trace (torch.profiler.record_function).
STEP_MARK = "compile_lab.step"
OPTIMIZER_MARK = "compile_lab.optimizer"

# key -> (title, what the time is and what changes it); in the order a stacked bar draws them.
CATEGORIES: dict[str, tuple[str, str]] = {
    "matmul": ("Matmuls and convolutions", "compute-bound: cuBLAS, cuDNN or Inductor's templates, or, at batch 1, "
                                           "bound by reading the weights (Inductor may write such a product as a "
                                           "reduction fused with the norm beside it); precision and autotuning "
                                           "change them"),
    "attention": ("Attention", "fused attention kernels (flash, cuDNN or memory-efficient), or the math path a "
                               "compiler writes instead: the softmax and the batched matmuls around it"),
    "pointwise": ("Pointwise, norms and reductions", "memory-bound: every kernel reads and writes its tensors, "
                                                     "which is what fusion removes"),
    "copy": ("Copies and conversions", "memory copies, dtype casts and layout changes (NCHW to NHWC)"),
    "optimizer": ("Optimizer", "the AdamW step over every weight"),
    "other": ("Other", "kernels that fit none of the above"),
    "idle": ("Idle", "the device waiting between kernels: Python, launch and framework overhead, which "
                     "CUDA graphs remove"),
}
WORK = tuple(k for k in CATEGORIES if k != "idle")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # what a Chrome trace calls work on the GPU
# Why a category shrinks from eager to compiled, for the sentence under the chart.
BECAUSE = {"matmul": "different matmul kernels", "attention": "a different attention kernel",
           "pointwise": "fusion", "copy": "fewer copies and conversions", "optimizer": "a fused optimizer step",
           "other": "fewer small kernels", "idle": "fewer launches, or CUDA graphs"}

# --- naming: which category a kernel or op belongs to --------------------------------------------------------
_NORM = re.compile(r"\bbn_|batch_?norm|layer_?norm|group_?norm|rms_?norm", re.I)  # cuDNN's own norm kernels too
_ATTENTION = re.compile(r"flash|fmha|attention|attn|sdpa|mem_eff", re.I)
_MATMUL = re.compile(r"gemm|gemv|cutlass|xmma|nvjet|cublas|cudnn|conv(?!ert)|wgrad|dgrad|fprop|winograd|"
                     r"triton_tem_|matmul|\b(?:aten::)?(?:addmm|mm|bmm|baddbmm|linear|addmv)\b|_linear_pointwise|"
                     r"mkldnn_convolution|_convolution_pointwise", re.I)
_COPY = re.compile(r"^memcpy|^memset|copy_kernel|direct_copy|nchwtonhwc|nhwctonchw|\baten::(?:copy_|_to_copy|to|"
                   r"clone|contiguous|cat|_cat)\b", re.I)
_OPTIMIZER = re.compile(r"multi_tensor_apply|_foreach_|fused_adam|adamw?_", re.I)
_POINTWISE = re.compile(r"triton_(?:poi|red|per)_|cpp_fused|elementwise|reduce|norm|softmax|vectorized|"
                        r"activation|gelu|relu|silu|index|scatter|gather|^aten::|at::native", re.I)
# Ops that only view, describe or allocate tensors (without the aten:: prefix): no compute of their own.
METADATA_OPS = frozenset({
    "view", "_unsafe_view", "as_strided", "transpose", "t", "expand", "reshape", "permute", "squeeze", "unsqueeze",
    "slice", "select", "split", "chunk", "unbind", "narrow", "alias", "detach", "lift_fresh", "resolve_conj",
    "resolve_neg", "empty", "empty_strided", "empty_like", "flatten", "expand_as", "view_as", "split_with_sizes",
    "is_same_size", "result_type"})
# On the CPU the self time of these, of filling fresh tensors, and of Dynamo's and AOT autograd's wrappers is
# framework overhead, counted with the idle.
_OVERHEAD = re.compile(r"^(?:aten::(?:" + "|".join(sorted(METADATA_OPS | {"zeros", "zero_", "fill_", "ones"})) +
                       r")$|Torch-Compiled Region|TorchDynamo|## Call CompiledFxGraph|AOTDispatcher|Pregraph|"
                       r"CompiledFunction|compile_lab\.)")
# Inductor names a fused kernel after its ops: one made only of these moves data and computes nothing.
_COPY_OPS = {"to", "copy", "clone", "convert", "element", "type", "permute", "view", "expand", "cat", "transpose",
             "unsqueeze", "squeeze", "slice", "select", "as", "strided", "contiguous", "constant", "pad", "t"}
_FUSED = re.compile(r"(?:triton_(?:poi|red|per)|cpp)_fused_(.+?)(?:_\d+)*$")

# --- what kind of attention, and which GEMMs compute in fp32 ---------------------------------------------------
# Attention takes one of these forms; a compiled step that has left a fused form for "math" is slower for it.
ATTENTION_FORMS = {
    "flash": "flash attention (one fused kernel)",
    "cudnn": "cuDNN's fused attention",
    "mem_eff": "memory-efficient attention (one fused kernel)",
    "math": "the math path: a softmax kernel between batched matmuls",
    "other": "other attention kernels",
}
FUSED_ATTENTION = ("flash", "cudnn", "mem_eff")
_MEM_EFF = re.compile(r"fmha_cutlass|cutlassF|cutlassB|efficient_attention|mem_eff", re.I)
# cuDNN's SDPA kernels: "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_...", launched by
# aten::_scaled_dot_product_cudnn_attention; a bare "sm90_flash..." comes from the same engine.
_CUDNN_ATTENTION = re.compile(r"cudnn.*(?:sdpa|flash|fmha|mha|attention|attn)|(?:sdpa|mha).*cudnn|^sm\d+_flash", re.I)
_FLASH = re.compile(r"flash|fmha", re.I)
# The attention's softmax, eager (softmax_warp_forward, cunn_SoftMaxForward) or Inductor's (triton_per_fused__safe_
# softmax_..., cpp_fused__softmax_...), and its backward; a loss's log-softmax is not attention.
_SOFTMAX = re.compile(r"softmax", re.I)
_LOG_SOFTMAX = re.compile(r"log_?softmax", re.I)
_MATH_ATTENTION = re.compile(r"_scaled_dot_product_attention_math|attention_math", re.I)
_BMM = re.compile(r"(?:^|[^a-z])(?:baddbmm|bmm)(?:[^a-z]|$)", re.I)
# A bmm-class GEMM this many kernels or fewer from a softmax kernel, in the step's order, is the math path's
# product (Q K^T before it, P V after it; in a backward, two each side): only names are known, and this is the
# shape an attention block leaves in them. A bmm far from any softmax (a batched linear, an MoE) stays a matmul.
NEAR_SOFTMAX = 4
# GEMMs whose names say fp32 data: cuBLAS's SIMT and TF32 kernels (ampere_sgemm, cutlass_80_simt_sgemm in
# cutlass::Kernel2, sm80_xmma_gemm_f32f32_f32f32_f32..., *_s1688gemm), and kernels templated over float. A name with a
# bf16 or fp16 mark is not flagged ("cutlass_80_tensorop_bf16_s16816gemm": bf16 in, fp32 accumulation), nor one that
# says nothing of its types: cuBLAS's nvjet kernels (nvjet_tst_..., nvjet_hsh_...) and Inductor's templates.
_FP32_GEMM = re.compile(r"sgemm|gemm_f32|f32f32_f32f32|s1688gemm|s16816gemm|s884gemm|tf32|gemmSN_|"
                        r"[<,] ?float, float, float", re.I)
_LOW_PRECISION = re.compile(r"bf16|f16|h16816|h1688|hgemm|half|e4m3|e5m2", re.I)


def is_softmax(name: str, op: str = "") -> bool:
    """An attention softmax (forward or backward), not a loss's log-softmax."""
    return bool(_SOFTMAX.search(name) or _SOFTMAX.search(op)) and not (_LOG_SOFTMAX.search(name) or
                                                                      _LOG_SOFTMAX.search(op))


def attention_form(name: str, op: str = "") -> str | None:
    """Which form of attention a kernel (GPU) or op (CPU) is, from its name and launching op; None: not attention
    by its name alone (a bmm is, by its place: math_attention_gemms)."""
    both = f"{name} {op}"
    if _MEM_EFF.search(both):
        return "mem_eff"
    if _CUDNN_ATTENTION.search(name) or (_CUDNN_ATTENTION.search(op) and _ATTENTION.search(name + op)):
        return "cudnn"
    if _FLASH.search(both):
        return "flash"
    if is_softmax(name, op) or _MATH_ATTENTION.search(both):
        return "math"
    if _ATTENTION.search(both):
        return "other"
    return None


def is_bmm(name: str, op: str = "") -> bool:
    return bool(_BMM.search(name) or _BMM.search(op))


def fp32_gemm(name: str) -> bool:
    """Whether a GEMM kernel's name says it computes on fp32 data (see _FP32_GEMM for the names it knows)."""
    return bool(_FP32_GEMM.search(name)) and not _LOW_PRECISION.search(name)


def math_attention_gemms(ordered: list[tuple[str, str, str]]) -> set[int]:
    """The positions of the bmm-class matmuls that sit within NEAR_SOFTMAX kernels of an attention softmax, in one
    profile's (name, op, category) list in launch order: the batched products of a decomposed attention."""
    softmax = [i for i, (name, op, _) in enumerate(ordered) if is_softmax(name, op)]
    if not softmax:
        return set()
    return {i for i, (name, op, category) in enumerate(ordered)
            if category == "matmul" and is_bmm(name, op) and any(abs(i - j) <= NEAR_SOFTMAX for j in softmax)}


def _only_moves_data(name: str) -> bool:
    match = _FUSED.search(name)
    return bool(match) and set(filter(None, match.group(1).split("_"))) <= _COPY_OPS


# Ops of a product Inductor wrote itself, as a reduction: "addmm" and the like also name the bias add Inductor splits
# off a cuBLAS product and fuses into the next kernel (a layer norm, a GELU), which is not the product.
_MATMUL_OPS = {"mm", "bmm", "mv"}


def _fuses_a_matmul(name: str) -> bool:
    """An Inductor kernel with a matrix product among its fused ops: a batch-1 product it wrote as a reduction
    (coordinate descent does so for decoding), with the norm or activation around it; its time is the weights'."""
    match = _FUSED.search(name)
    return bool(match) and name.startswith(("triton_red_", "triton_per_")) and \
        not _MATMUL_OPS.isdisjoint(match.group(1).split("_"))


def categorize(name: str, op: str = "", *, in_optimizer: bool = False) -> str:
    """The category of a kernel (GPU) or op (CPU) `name`, launched by the op `op` where known.

    A generic eager kernel name ("vectorized_elementwise_kernel") says little, so the op that
    launched it (aten::copy_, aten::_foreach_mul_) decides between copy, optimizer and pointwise.
    """
    if in_optimizer or _OPTIMIZER.search(op) or _OPTIMIZER.search(name):
        return "optimizer"
    if attention_form(name, op):
        return "attention"
    if _only_moves_data(name) or _COPY.search(name):
        return "copy"
    if _fuses_a_matmul(name):
        return "matmul"
    if _NORM.search(name):
        return "pointwise"
    if _MATMUL.search(name):
        return "matmul"
    if _COPY.search(op):
        return "copy"
    if _MATMUL.search(op):
        return "matmul"
    if _POINTWISE.search(name) or _POINTWISE.search(op):
        return "pointwise"
    return "other"


def short_name(name: str) -> str:
    """A kernel's name without its C++ template arguments and signature: the part a person reads."""
    name = name.removeprefix("void ")
    depth, out = 0, []
    for ch in name:  # drop everything inside <...>, keeping what follows
        depth += ch == "<"
        if depth == 0 and ch != ">":
            out.append(ch)
        depth -= ch == ">" and depth > 0
    return "".join(out).split("(")[0].strip()[:120] or name[:120]


# --- the analysis ---------------------------------------------------------------------------------------------
@dataclass
class Breakdown:
    """One variant's average profiled step: milliseconds per category, the idle, and the top kernels."""

    step_ms: float                                    # the profiled window divided by the steps in it
    ms: dict[str, float]                              # category (WORK and "idle") -> ms per step
    steps: int
    source: str                                       # "gpu kernels" or "cpu ops"
    top: list[dict[str, Any]] = field(default_factory=list)  # [{name, op, category, form, ms, share_pct}]
    overlap_ms: float = 0.0                           # kernels running at once on several streams, per step
    profiled_idle_ms: float | None = None             # the gaps the profiler saw, when idle was re-based on timing
    launches: dict[str, float] = field(default_factory=dict)         # category -> kernels (ops) per step
    attention_forms: dict[str, float] = field(default_factory=dict)  # ATTENTION_FORMS key -> ms per step
    fp32_gemm_ms: dict[str, float] = field(default_factory=dict)     # category -> ms per step of fp32-named GEMMs
    by_class: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # category -> its top kernels

    @property
    def accounted_ms(self) -> float:
        return sum(self.ms.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ms": {k: round(v, 4) for k, v in self.ms.items()}, "step_ms": round(self.step_ms, 4)}


# The kernels each class keeps by name, for the sentences that say what changed in it.
TOP_PER_CLASS = 4


def complete(events: Iterable[dict]) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _launch_contexts(host: list[dict], launches: list[dict]) -> dict[Any, list[dict]]:
    """For each launch (by correlation id): the ops and annotations around it on its thread, outermost first.

    One sweep per thread in time order with a stack of the open events (they nest properly per thread).
    """
    contexts: dict[Any, list[dict]] = {}
    for tid in {e.get("tid") for e in launches}:
        items = sorted([(e["ts"], 0, -e["dur"], i, e) for i, e in enumerate(host) if e.get("tid") == tid] +
                       [(e["ts"], 1, 0, i, e) for i, e in enumerate(launches) if e.get("tid") == tid],
                       key=lambda item: item[:4])
        stack: list[dict] = []
        for ts, kind, _, _, e in items:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < ts:
                stack.pop()
            if kind == 0:
                stack.append(e)
            else:
                contexts[e["args"]["correlation"]] = list(stack)
    return contexts


def launchers(events: list[dict]) -> dict[str, tuple[str, bool]]:
    """Kernel name -> (the op that launched it, whether inside the optimizer mark), from a trace with CPU ops.

    The GPU's timing trace is recorded without CPU activity, because recording every host op slows
    the launches it would measure; a second, detailed trace of the same steps says who launched what.
    """
    events = complete(events)
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})]
    contexts = _launch_contexts(host, launches)
    found: dict[str, tuple[str, bool]] = {}
    for k in events:
        if k.get("cat") in DEVICE_CATS and k["name"] not in found:
            around = contexts.get(k.get("args", {}).get("correlation"), [])
            ops = [e["name"] for e in around if e.get("cat") == "cpu_op"]
            found[k["name"]] = (ops[-1] if ops else "", any(e["name"] == OPTIMIZER_MARK for e in around))
    return found


def analyze(events: list[dict], steps: int, *, launched_by: dict[str, tuple[str, bool]] | None = None,
            top: int = 8) -> Breakdown | None:
    """The breakdown of `steps` steps profiled back to back: from the GPU kernels when the trace has any (the
    window runs from the first kernel's start to the last one's end), else from the CPU ops inside the step
    marks. `launched_by` (from launchers()) names the op behind each kernel when this trace has no CPU ops.
    None when there is nothing to break down."""
    events = complete(events)
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    if device:
        return _gpu(events, device, steps, top, launched_by)
    if not any(e["name"] == STEP_MARK for e in events):
        return None
    return _cpu(events, steps, top)


def _gpu(events: list[dict], device: list[dict], steps: int, top: int,
         launched_by: dict[str, tuple[str, bool]] | None) -> Breakdown:
    known = launched_by if launched_by is not None else launchers(events)
    device = sorted(device, key=lambda k: k["ts"])
    launches = []
    for k in device:
        op, in_optimizer = known.get(k["name"], ("", False))
        launches.append((k["name"], op, categorize(k["name"], op, in_optimizer=in_optimizer), k["dur"] / 1e3))
    start = min(k["ts"] for k in device)
    window_us = max(k["ts"] + k["dur"] for k in device) - start
    busy_us = _union_us([(k["ts"], k["ts"] + k["dur"]) for k in device])
    b = _classes(launches, window_us / 1e3, steps, "gpu kernels", top)
    b.ms["idle"] = (window_us - busy_us) / 1e3 / steps
    b.overlap_ms = round(max(sum(b.ms[c] for c in WORK) - busy_us / 1e3 / steps, 0.0), 4)
    return b


def _cpu(events: list[dict], steps: int, top: int) -> Breakdown:
    marks = [e for e in events if e["name"] == STEP_MARK]
    tid = marks[0].get("tid")
    start, stop = min(m["ts"] for m in marks), max(m["ts"] + m["dur"] for m in marks)
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == tid
                  and start <= e["ts"] < stop), key=lambda e: (e["ts"], -e["dur"]))
    optimizer = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == OPTIMIZER_MARK]
    # Self time: an op's duration less that of the ops directly inside it.
    self_us = {id(e): e["dur"] for e in ops}
    stack: list[dict] = []
    for e in ops:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            self_us[id(stack[-1])] -= e["dur"]
        stack.append(e)
    launches = []
    for e in ops:
        if _OVERHEAD.search(e["name"]):
            continue
        in_optimizer = any(a <= e["ts"] < b for a, b in optimizer)
        launches.append((e["name"], "", categorize(e["name"], in_optimizer=in_optimizer),
                         max(self_us[id(e)], 0.0) / 1e3))
    window_ms = (stop - start) / 1e3
    b = _classes(launches, window_ms, steps, "cpu ops", top)
    b.ms["idle"] = max(window_ms - sum(t for *_, t in launches), 0.0) / steps
    return b


def _classes(launches: list[tuple[str, str, str, float]], window_ms: float, steps: int, source: str,
             top: int) -> Breakdown:
    """The per-step split of (name, launching op, category, ms) launches in launch order: the bmm-class GEMMs of a
    decomposed attention move to attention (math_attention_gemms), then each category's time, launches, attention
    forms, fp32-named GEMMs and top kernels. The idle is the caller's."""
    math = math_attention_gemms([(name, op, category) for name, op, category, _ in launches])
    ms, count = dict.fromkeys(CATEGORIES, 0.0), dict.fromkeys(WORK, 0)
    forms: dict[str, float] = {}
    fp32: dict[str, float] = {}
    by_name: dict[tuple[str, str, str], list] = {}  # (name, op, category) -> [form, fp32, ms, launches]
    for i, (name, op, category, t) in enumerate(launches):
        category = "attention" if i in math else category
        form = ("math" if i in math else attention_form(name, op)) if category == "attention" else None
        gemm32 = category in ("matmul", "attention") and form not in FUSED_ATTENTION and fp32_gemm(name)
        ms[category] += t
        count[category] += 1
        if form:
            forms[form] = forms.get(form, 0.0) + t
        if gemm32:
            fp32[category] = fp32.get(category, 0.0) + t
        entry = by_name.setdefault((short_name(name), op, category), [form, gemm32, 0.0, 0])
        entry[2] += t
        entry[3] += 1
    busy = sum(e[2] for e in by_name.values()) or 1.0

    def row(key, entry) -> dict[str, Any]:
        (name, op, category), (form, gemm32, t, n) = key, entry
        return {"name": name, "op": op, "category": category, "form": form, "fp32": gemm32,
                "ms": round(t / steps, 4), "launches": round(n / steps, 2), "share_pct": round(100 * t / busy, 1)}

    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][2])
    classes: dict[str, list[dict[str, Any]]] = {}
    for key, entry in ranked:
        if len(classes.setdefault(key[2], [])) < TOP_PER_CLASS:
            classes[key[2]].append(row(key, entry))
    per_step = lambda d: {k: round(v / steps, 4) for k, v in d.items()}  # noqa: E731
    return Breakdown(step_ms=window_ms / steps, ms={k: v / steps for k, v in ms.items()}, steps=steps, source=source,
                     top=[row(key, entry) for key, entry in ranked[:top]],
                     launches={k: round(n / steps, 2) for k, n in count.items() if n},
                     attention_forms=per_step(forms), fp32_gemm_ms=per_step(fp32), by_class=classes)


def against_timed(b: Breakdown, timed_ms: float) -> Breakdown:
    """The GPU breakdown re-based on the step timed without the profiler: idle = timed step - kernel time.

    The profiler measures kernel durations exactly, but recording them slows each launch by
    microseconds, which widens the gaps of a launch-bound step (its profiled step can take half as long again as
    its timed one). So the kernels' times stand, and the idle is what the timed
    step leaves over; the profiled gaps are kept beside it.
    """
    busy = sum(b.ms.get(c, 0.0) for c in WORK) - b.overlap_ms
    return replace(b, ms={**b.ms, "idle": max(timed_ms - busy, 0.0)}, profiled_idle_ms=b.ms["idle"])


# How far a profiled step may be off the timed one (the profiler's own overhead) before its bars are scaled to the
# timed step, and past which they are withheld: shares measured under that much overhead say more about the
# profiler than about the model (on a CPU the profiler can make a compiled step several times its timed length).
SCALE_OFF_PCT = 10.0
WITHHOLD_OFF_PCT = 100.0


def as_timed(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> how its bars are drawn beside the timed figures: {"ms": {category: ms per step} or None,
    "off_pct": the profiled step against the timed median step (None where either is missing),
    "shown": "profiled" | "scaled" (each category times timed / profiled: the shares stand, the lengths are the
    timed step's) | "withheld" (off by more than WITHHOLD_OFF_PCT)}."""
    out = {}
    for variant, stored in (result.get("breakdown") or {}).items():
        total, timed = sum(stored["ms"].values()), result.get(f"{variant}_latency_ms_p50")
        off = (total - timed) / timed * 100 if timed and total else None
        if off is None or abs(off) <= SCALE_OFF_PCT:
            out[variant] = {"ms": stored["ms"], "off_pct": off, "shown": "profiled"}
        elif off > WITHHOLD_OFF_PCT:
            out[variant] = {"ms": None, "off_pct": off, "shown": "withheld"}
        else:
            out[variant] = {"ms": {k: v * timed / total for k, v in stored["ms"].items()}, "off_pct": off,
                            "shown": "scaled"}
    return out


# The stored figures a profiled step's split gives (f"{variant}_{key}"): withheld wherever its bars are.
SPLIT_FIGURES = tuple(f"{k}_ms" for k in CATEGORIES)


def withheld_words(shown: dict[str, dict[str, Any]]) -> str | None:
    """Why the split of a step is not shown (its bars on the page, its figures in every table and on the command
    line), from as_timed's answer: a variant's profiled steps ran far off its timed ones; None when it is shown."""
    far = {v: s["off_pct"] for v, s in shown.items() if s["shown"] == "withheld"}
    if not far:
        return None
    return ("withheld: the profiler slowed the " + " and ".join(f"{v} steps by {off:+.0f}%" for v, off in far.items())
            + " against the timed ones, so its shares would describe the profiler more than the model")


def shown_ms(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """variant -> {category: ms per step} exactly as "Where the time goes" draws its bars (as_timed); {} when the
    page withholds them (a variant's profiled steps ran far off its timed ones) or nothing was profiled.

    Everything that quotes a category's ms (the suggestions, the sentences under the chart) reads this, so a
    sentence never quotes another figure than the bar beside it, nor one the page withheld.
    """
    shown = as_timed(result)
    if any(s["shown"] == "withheld" for s in shown.values()):
        return {}
    return {v: s["ms"] for v, s in shown.items() if s["ms"]}


def shown_scale(result: dict[str, Any]) -> dict[str, float]:
    """variant -> the factor its profiled milliseconds were multiplied by to draw its bars (as_timed: 1.0 where drawn
    as profiled, timed / profiled where scaled); {} where shown_ms is. Whatever quotes a kernel of a variant beside its
    bars multiplies by this, so a kernel and its class are in one unit."""
    if not shown_ms(result):
        return {}
    scale = {}
    for variant, shown in as_timed(result).items():
        profiled = sum(result["breakdown"][variant]["ms"].values())
        scale[variant] = result[f"{variant}_latency_ms_p50"] / profiled if shown["shown"] == "scaled" else 1.0
    return scale


def differences(eager: dict[str, Any], compiled: dict[str, Any], *, most: int = 3, at_least_ms: float = 0.0) -> str:
    """The biggest changes from eager to compiled, in words: 'pointwise 4.10 → 0.90 ms (fusion); ...'.

    Takes the stored form of two breakdowns (Breakdown.to_dict()); changes smaller than 5% of the eager
    step or `at_least_ms` are left out.
    """
    floor = max(at_least_ms, 0.05 * eager["step_ms"])
    changes = sorted(((compiled["ms"].get(k, 0.0) - eager["ms"].get(k, 0.0), k) for k in CATEGORIES),
                     key=lambda c: -abs(c[0]))
    parts = []
    for delta, k in changes[:most]:
        if abs(delta) < floor:
            continue
        before, after = eager["ms"].get(k, 0.0), compiled["ms"].get(k, 0.0)
        why = BECAUSE[k] if delta < 0 else "more time here compiled"
        parts.append(f"{CATEGORIES[k][0].lower()} {before:.2f} → {after:.2f} ms ({why})")
    return "; ".join(parts)
