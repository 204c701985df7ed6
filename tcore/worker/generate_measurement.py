"""The generate task, in the worker: greedy generation with a KV cache, eager against compiled, in paired rounds.

As gpt-fast does, the prefill (the prompt into the cache, the first token) and the decode step (one token per
sequence) are two functions, compiled separately: the decode step with fullgraph=True when the cache is static, so
its shapes never change and reduce-overhead can replay it as one CUDA graph; the prefill without CUDA graphs, since
its shape is the prompt's. A timed round is one block of generations per variant, back to back, the order
alternating; its ratio is compiled over eager decode tokens per second, the run's headline (tcore.figures.paired).
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

import torch

import sample_models
from sample_models import decoding
from tcore import figures
from tcore.experiment.spec import NO_CUDAGRAPHS, PRECISIONS, Experiment
from tcore.figures import Result, breakdown
from tcore.host.power import PowerMeter, PowerSampler
from tcore.worker import compile_artifacts, diagnostics, membw, profiling
from tcore.worker.build import DTYPES, compile_errors
from tcore.worker.device_lease import DeviceLease
from tcore.worker.generation import Generation, Generator, compile_pair
from tcore.worker.phases import Emit
from tcore.worker.rounds import DecodeRounds
from tcore.worker.timing import (
    PeakMemory,
    no_gc,
    pinned_launch_thread,
)


class GenerateMeasurement(DecodeRounds):
    """The phases of a generate run, in order; each fills its part of `self.result`."""

    def __init__(self, exp: Experiment, device: str, meter: PowerMeter, emit: Emit,
                 sampler: PowerSampler | None, env: dict[str, Any], lease: DeviceLease | None = None) -> None:
        super().__init__(exp, device, meter, emit, sampler, env, lease, compiles=exp.compiles)

    def measure(self, breaks: diagnostics.BreakRecorder) -> Result:
        exp, run, details = self.exp, self.result.run, self.result.details
        # The copy-bandwidth yardstick fills the memory bus, the build makes the weights on the device: work that would
        # land in another run's timed rounds, so both hold the device, with the eager generations after them.
        with self.lease.hold("eager"):
            decoder, prompt, new, cache_dtype = self.build()
            self.phase("eager")
            eager = Generator(decoder, decoder.prefill, decoder.decode, exp, self.device, prompt, new, cache_dtype)
            with pinned_launch_thread(self.device, self.lease.measure_cpus):
                eager.run()  # allocation and kernel selection
                reference = eager.run(each_step=True)
        self.progress("eager", 1, 1)
        run.eager_first_call_s = reference.ttft_s
        run.kv_cache_gib = eager.kv_bytes / 2**30
        details["eager_tokens"] = reference.tokens[0].tolist()
        compiled = None
        if exp.compiles:
            with self.lease.compiling("compiled", firm=exp.mode.startswith("max-autotune")):
                compiled = self.compile(decoder, prompt, new, cache_dtype, reference)
            self._record(diagnostics.collect(breaks, self.lease.compile_waits_s))
            run.cache_artifacts_bytes = compile_artifacts.save()
        else:
            for key in ("speedup", "compile_s"):
                self.result.unavailable[key] = "nothing is compiled in this run (compile=off)"
        recompiles_before = run.recompile_count or 0
        self.lease.take("compiled")  # the timed rounds: held, and never let go in between
        # The launch thread on the core the lab keeps for the device's holder, the collector off: as Measurement
        # times its rounds (a decode step at batch 1 is the host's launch rate).
        with pinned_launch_thread(self.device, self.lease.measure_cpus) as (cpu, why_not), no_gc():
            details.update(pinned_cpu=cpu, pinned_cpu_words=why_not)
            self.time_rounds(eager, compiled)
        self.derive(eager, compiled)
        if compiled is not None:
            self.new_prompt(compiled)
            late = diagnostics.collect()["recompile_count"] - recompiles_before - (run.prompt_recompiles or 0)
            if late > 0:
                self.result.notes.append(f"{late} recompilation(s) happened during the timed generations; their "
                                         "cost is in the timings")
        self.lease.release()  # a run waiting to measure goes ahead of this one's profiling pass
        with self.lease.hold("profile"), pinned_launch_thread(self.device, self.lease.measure_cpus):
            self.profile(eager, compiled)
        details.update(self.lease.words())
        if compiled is not None:
            self.compile_totals()
        return self.result

    def build(self) -> tuple[Any, tuple, int, torch.dtype]:
        """The copy-bandwidth yardstick, then the model, its decoder and a prompt on the device: (decoder, prompt,
        new tokens, the KV cache's dtype)."""
        exp, run, details = self.exp, self.result.run, self.result.details
        self.phase("building")
        self.yardstick = membw.measure(self.device)  # before the model, while the most memory is free
        run.mem_bw_measured_tb_s = self.yardstick.tb_s
        if self.yardstick.tb_s is None:
            self.result.unavailable["mem_bw_measured_tb_s"] = self.yardstick.why_not
        else:
            details["mem_bw_method"] = self.yardstick.method
        entry = sample_models.get(exp.model)
        torch.manual_seed(exp.seed)
        model = entry.build(exp.preset, device=self.device).eval()
        if exp.skip_full_mask:  # the prefill's and decode step's masks, which transformers builds from none
            from sample_models.sources import hf_masks

            hf_masks.install()
        weights = DTYPES[PRECISIONS[exp.precision].weights]
        model = model.to(weights)
        compute = PRECISIONS[exp.precision].autocast
        cache_dtype = DTYPES[compute] if compute else weights
        decoder = decoding.decoder(entry, model, exp.preset)
        prompt_len, new = decoding.lengths(entry, exp.preset, exp.prompt_len, exp.new_tokens)
        generator = torch.Generator(self.device).manual_seed(exp.seed)
        prompt = tuple(t.to(weights) if t.is_floating_point() else t
                       for t in decoder.prompt(exp.batch_size, prompt_len, self.device, generator))
        run.param_count = sum(p.numel() for p in model.parameters())
        self.weight_bytes = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
        self.gathered_bytes = gathered_bytes(model)
        details.update(prompt_tokens=prompt_len, new_tokens=new, kv_cache=exp.kv_cache, rounds=exp.rounds,
                       peak_mem_source=PeakMemory(self.device).what, power_source=self.meter.source)
        return decoder, prompt, new, cache_dtype

    def compile(self, decoder, prompt, new, cache_dtype, reference: Generation) -> Generator:
        """The first compiled generation, one decode step at a time: the compile split and the token check."""
        exp, run, details = self.exp, self.result.run, self.result.details
        self.phase("compiling")
        details["cache_artifacts"], cache_note = compile_artifacts.load(self.env)
        if cache_note:
            self.result.notes.append(cache_note)
        diagnostics.reset()
        with compile_errors():
            prefill, decode = compile_pair(decoder, exp)
            compiled = Generator(decoder, prefill, decode, exp, self.device, prompt, new, cache_dtype)
            with diagnostics.progress_events(self.emit):  # the live view's graphs and kernels so far
                first, events = _with_compiles(lambda: compiled.run(each_step=True), self.t_start,
                                               self.lease.compile_waits_s)
        waits = self.lease.compile_waits_s  # the steps' times hold the waits for the device: they are not compiling
        details["first_call_phases_s"] = diagnostics.phase_split_s(diagnostics.metrics(), waits)  # the timeline
        eager_decode = sum(reference.decode_step_s)
        prefill_wait = sum(w for (cid, _), w in waits.items()
                           if any(e["compile_id"] == cid and e["frame"] == "prefill" for e in events))
        decode_wait = sum(waits.values()) - prefill_wait
        run.compile_prefill_s = max(first.ttft_s - prefill_wait - reference.ttft_s, 0.0)
        run.compile_decode_s = max(sum(first.decode_step_s) - decode_wait - eager_decode, 0.0)
        run.compile_s = run.compile_prefill_s + run.compile_decode_s
        run.compiled_first_call_s = max(first.ttft_s + first.decode_s - prefill_wait - decode_wait, 0.0)
        run.eager_step_s = statistics.median(reference.decode_step_s)
        self.emit({"type": "figure", "name": "compile_s", "value": run.compile_s})
        # the decode step's compiles: the first step, and any step whose cache length it had not seen
        run.decode_recompiles = sum(1 for e in events if e["kind"] == "recompile" and e["frame"] != "prefill")
        details["compile_by_function_s"] = _by_frame(events)
        eager_tokens, compiled_tokens = reference.tokens.tolist(), first.tokens.tolist()
        run.tokens_same_pct = figures.same_tokens_pct(eager_tokens, compiled_tokens)
        details["tokens_match"] = eager_tokens == compiled_tokens
        details["compiled_tokens"] = compiled_tokens[0]
        if not details["tokens_match"]:
            where = next(i for i, (a, b) in enumerate(zip(reference.tokens.T.tolist(), first.tokens.T.tolist()))
                         if a != b)
            self.result.notes.append(f"compiled generated other tokens than eager from token {where + 1} on "
                                     f"({run.tokens_same_pct:.1f}% equal): greedy decoding follows the largest "
                                     "logit, so a rounding difference between near-equal logits changes the text")
        self.phase("warmup")
        with compile_errors():
            compiled.run()  # CUDA graphs are recorded by now; this one settles allocation
        return compiled

    def new_prompt(self, compiled: Generator) -> None:
        """One more compiled generation with a prompt a token shorter: what a new prompt length costs."""
        self.phase("new_prompt")
        shorter = tuple(t[:, :-1] if t.dtype == torch.long and t.dim() == 2 else t for t in compiled.prompt)
        with compile_errors():
            _, events = _with_compiles(lambda: compiled.run(shorter), self.t_start, self.lease.compile_waits_s)
        self.result.run.prompt_recompiles = sum(1 for e in events if e["kind"] == "recompile")
        self.result.details["prompt_recompile_reasons"] = [e["reason"] for e in events if e["kind"] == "recompile"]

    def not_profiled(self, name: str, why: str) -> None:
        """No profiled decode step for this variant: its idle share and its breakdown ("Where the time goes") say
        why, instead of a reason that belongs to another kind of run."""
        self.result.unavailable[f"{name}_decode_idle_pct"] = why
        self.result.unavailable[f"{name}_profiled_step_ms"] = why

    def profile(self, eager: Generator, compiled: Generator | None) -> None:
        """A few decode steps of each variant under the profiler: the device's idle share (launch-bound or not)."""
        self.phase("profiling")
        if self.device != "cuda":
            for name in self.result.variants:
                self.not_profiled(name, "on the CPU the host runs the ops itself: there is no device waiting on "
                                        "launches")
            return
        for name, gen in (("eager", eager), ("compiled", compiled)):
            if gen is None:
                continue
            steps = profiling.MIN_STEPS * 2
            if gen.new - 1 < 1 + 2 * steps:  # one unprofiled step, then two profiled passes (tcore.worker.profiling)
                self.not_profiled(name, f"too few new tokens to profile {steps} decode steps: generate "
                                        f"{2 * steps + 2} or more")
                continue
            cache = gen.cache if gen.static else gen._new_cache()
            if gen.static:
                gen.decoder.reset(cache)
            with torch.no_grad(), gen.autocast:
                # positions made on the device up front, as Generator.run does: a tensor built from a host int per
                # step would copy it to the GPU and wait for the stream, a sync the timed steps do not have
                positions = iter(gen.positions(gen.prompt_len))
                state = {"token": gen.prefill(cache, *gen.prompt).clone()}

                def step():  # the next decode step of a generation, as the timed ones run
                    gen.mark_step()
                    state["token"] = gen.decode(cache, state["token"][:, None], next(positions)).clone()

                kernels, found = profiling.profile_steps(step, self.device, steps, name)
            figs = self.result.variant(name)
            figs.kernels_per_step = kernels
            if found is not None and found.step_ms:
                # the profiler slows launches: the kernels' times stand, the idle is what the timed step leaves
                step_ms = figs.decode_ms_per_token if found.source == "gpu kernels" else found.step_ms
                if found.source == "gpu kernels":
                    found = breakdown.against_timed(found, step_ms)
                figs.decode_idle_pct = 100 * found.ms.get("idle", 0.0) / step_ms
                figs.profiled_step_ms = found.step_ms
                for category, ms in found.ms.items():  # a decode step's time by kernel class, the idle its timed
                    setattr(figs, f"{category}_ms", ms)  # step leaves: what keeps it from the bandwidth limit
                self.result.details.setdefault("breakdown", {})[name] = found.to_dict()
        if compiled is not None and self.result.compiled.decode_idle_pct is not None:
            idle = self.result.eager.decode_idle_pct, self.result.compiled.decode_idle_pct
            self.result.details["launch_bound_words"] = launch_words(*idle, self.exp.mode)


def launch_words(eager_idle: float | None, compiled_idle: float | None, mode: str) -> str:
    """Whether the decode step is launch-bound (the device idle for half the step or more), eager and compiled."""
    def said(idle):
        return "n/a" if idle is None else f"{'launch-bound' if idle >= 50 else 'not launch-bound'} ({idle:.0f}% idle)"
    graphs = " CUDA graphs replay the step as one launch." if mode in NO_CUDAGRAPHS else (
        " mode=reduce-overhead would replay it as one CUDA graph." if (compiled_idle or 0) >= 50 else "")
    return f"Decode step: eager {said(eager_idle)}, compiled {said(compiled_idle)}.{graphs}"


def gathered_bytes(model: torch.nn.Module) -> int:
    """Bytes of the embedding tables a decode step reads a row of (per sequence), not whole: every nn.Embedding's
    weight, less one that an output head shares (a tied head reads the table whole to score the vocabulary)."""
    tables = {id(m.weight): m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    whole = {id(p) for m in model.modules() if not isinstance(m, torch.nn.Embedding)
             for p in m.parameters(recurse=False)}
    return sum(w.numel() * w.element_size() for key, w in tables.items() if key not in whole)


def _with_compiles(generate: Callable[[], Generation], t0: float,
                   waits: diagnostics.Waits | None = None) -> tuple[Generation, list[dict[str, Any]]]:
    """A generation, and the compilations it caused (diagnostics.compile_events, times from t0, less device waits)."""
    seen = len(diagnostics.metrics())
    out = generate()
    return out, diagnostics.compile_events(diagnostics.metrics()[seen:], t0, waits)


def _by_frame(events: list[dict[str, Any]]) -> dict[str, float]:
    """Compile seconds by the compiled function's name (prefill, decode, or a frame they call)."""
    out: dict[str, float] = {}
    for e in events:
        if e["kind"] in ("compile", "recompile"):
            out[e["frame"] or "?"] = round(out.get(e["frame"] or "?", 0.0) + (e["duration_s"] or 0.0), 3)
    return out
