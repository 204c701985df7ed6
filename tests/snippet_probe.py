"""Run by tests/test_snippet.py in a fresh process: what Dynamo hands Inductor, for a run's snippet or for the
run's own code path (tcore.worker), as JSON on stdout.

Inductor's compile_fx is replaced by a recorder that returns the graph to run as it is, so no code is
generated (seconds, not minutes, on the CPU) while Dynamo, the compile calls and the options it receives
are untouched. The snippet runs first, in a process where nothing else has set anything, so a setting it
leaves out shows; then Dynamo is reset and the lab's path runs. Each spec is probed in a child forked after the
imports (torch's, a few seconds of a core, paid once for all of them), so each starts as clean as a fresh process.
Usage: python tests/snippet_probe.py '<spec>' ['<spec>' ...]; a line on stdout for each, in their order:
PROBE {"case": i, "seen": {...}} or PROBE {"case": i, "error": "..."}.
"""
import json
import os
import sys
import traceback

import torch
import torch._inductor.compile_fx as compile_fx

graphs = []


def _describe(x):
    if isinstance(x, torch.Tensor):
        return [str(x.dtype), [str(s) for s in x.shape], [str(s) for s in x.stride()], x.requires_grad]
    return "symbolic" if isinstance(x, torch.SymInt) else repr(x)


def _record(gm, example_inputs, **kwargs):
    nodes = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    graphs.append({"ops": [getattr(n.target, "__name__", str(n.target)) for n in nodes],
                   "inputs": [_describe(x) for x in example_inputs],
                   "options": {k: repr(v) for k, v in sorted((kwargs.get("config_patches") or {}).items())}})
    return gm.forward


def lab_path(exp):
    from tcore.worker import shapes
    from tcore.worker.build import build, step_fn
    from tcore.worker.compile import apply_compile, optimizer_step
    from tcore.worker.measurement import _configure_torch

    _configure_torch(exp, "cpu")
    w = build(exp, "cpu")
    target = apply_compile(w.model, exp, w.entry.repeated_blocks(w.model), w.entry.repeated_call)
    step = step_fn(target, w, exp, "cpu", optimizer_step(w.optimizer, exp) if w.optimizer else None)
    if exp.shape_remedy == "mark_dynamic":
        shapes.mark_dynamic(w.compiled_batches[0], w.dims)
    step(w.compiled_batches[0])  # Measurement.compile
    if w.schedule and w.schedule.buckets:  # Measurement.warm_up
        for size in w.schedule.buckets:
            step(next(b for b, s in zip(w.compiled_batches, w.schedule.sizes) if w.schedule.padded(s) == size))
    for batch in w.compiled_batches[1:]:  # the schedule's pass
        step(batch)


def _settings():
    return {"recompile_limit": torch._dynamo.config.recompile_limit,
            "inductor": {k: repr(getattr(torch._inductor.config, k)) for k in
                         ("freezing", "coordinate_descent_tuning", "epilogue_fusion", "aggressive_fusion",
                          "max_fusion_size")}}


def probe(spec: dict) -> dict:
    from tcore.experiment.spec import Experiment
    from tcore.export.snippet import code_for

    # Up to the timing section: it runs the compiled step again, on inputs already compiled for, and takes seconds
    # a step (tests/test_snippet_timing.py runs it); what is compared here is what the compile calls hand Inductor.
    code = code_for(spec, "cpu").split("# --- The effect")[0]
    exec(compile(code, "snippet.py", "exec"), {"__name__": "__main__"})
    seen = {"snippet": {"graphs": list(graphs), "settings": _settings()}}
    graphs.clear()
    torch._dynamo.reset()
    lab_path(Experiment.from_dict(spec))
    seen["lab"] = {"graphs": graphs, "settings": _settings()}
    return seen


def _say(line: dict) -> None:
    sys.stdout.write("PROBE " + json.dumps(line) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    import tcore.experiment.spec  # noqa: F401  (what every probe imports first, imported once)
    import tcore.export.snippet  # noqa: F401

    compile_fx.compile_fx = _record
    for case, arg in enumerate(sys.argv[1:]):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _say({"case": case, "seen": probe(json.loads(arg))})
                code = 0
            except BaseException:  # noqa: BLE001 (said as the case's own failure; the others go on)
                _say({"case": case, "error": traceback.format_exc()[-3000:]})
                code = 1
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if not os.WIFEXITED(status):  # killed by a signal: it said nothing
            _say({"case": case, "error": f"the probe's process ended by signal {os.WTERMSIG(status)}"})
