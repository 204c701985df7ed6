"""One step of the start-up ladder, in a fresh process: build the model, get to its first result one way, time it.

    python -m tcore.worker.ladder_rung STEP SPEC_JSON WORKDIR     (tcore.lab.ladder starts it; prints one JSON line)

The lab side (tcore.lab.ladder) decides the process and the cache directories each step gets: a cold compile
is a fresh process with fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR, a warm one reuses the cold one's.
Steps: eager (also writes the reference output), cold and warm (torch.compile; cold saves its compile artifacts:
the Mega-Cache and, on the CPU, the C++ kernels it leaves out, the bundle the Run page's runs save), mega_cache
(loads that bundle as the Run page's cache=artifacts does, then torch.compile), aot_build / aot_load
(torch.compile(...).aot_compile, saved with save_compiled_function, loaded with
torch.compiler.load_compiled_function), aoti_build / aoti_load (torch.export, AOTInductor package). Each reports
its phases in seconds, its artifact's size, its steady-state throughput and how far its output is from eager's.
"""
from __future__ import annotations

import os
import time

_T_IMPORT = time.perf_counter()  # before torch: what the imports cost is measured from here
# The lab side's clock when it started this process: the interpreter's own start-up is the gap to here.
_INTERPRETER_S = time.time() - float(os.environ.get("COMPILE_LAB_LADDER_LAUNCHED_AT") or time.time())

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from contextlib import nullcontext  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402

from tcore.experiment.device import resolve_device  # noqa: E402
from tcore.experiment.spec import PRECISIONS, Experiment  # noqa: E402
from tcore.host import features  # noqa: E402
from tcore.worker import compile_artifacts  # noqa: E402
from tcore.worker.build import DTYPES, build, clone, compare  # noqa: E402
from tcore.worker.timing import sync, timed_call  # noqa: E402

IMPORTS_S = time.perf_counter() - _T_IMPORT

STEPS = ("eager", "cold", "warm", "mega_cache", "aot_build", "aot_load", "aoti_build", "aoti_load")
REFERENCE = "reference.pt"    # the eager output every other step compares with
MEGA_CACHE = "compile-artifacts.zip"  # the Mega-Cache and the CPU's C++ kernels (compile_artifacts.save_bundle)
AOT_FUNCTION = "aot-compiled.bin"
AOTI_PACKAGE = "model.pt2"


class Unavailable(Exception):
    """This step cannot run here; the message says why (a torch without the API, a model export refuses)."""


def forward_fn(exp: Experiment, device: str) -> Callable:
    """model(*inputs) under the experiment's autocast: one plain function that each way compiles the same."""
    compute = PRECISIONS[exp.precision].autocast

    def forward(model, *inputs):
        with torch.autocast(device_type=device, dtype=DTYPES[compute]) if compute else nullcontext():
            return model(*inputs)
    return forward


class Step:
    """One ladder step: the phases it times, then the steady state of whatever it produced."""

    def __init__(self, name: str, exp: Experiment, workdir: Path) -> None:
        self.name, self.exp, self.workdir = name, exp, workdir
        self.device = resolve_device(exp.device, torch.cuda.is_available())
        self.phases: dict[str, float] = {"interpreter_s": round(max(_INTERPRETER_S, 0.0), 4),
                                         "imports_s": round(IMPORTS_S, 4)}
        self.out: dict[str, Any] = {"step": name, "device": self.device, "torch": torch.__version__, "notes": [],
                                    "device_name": torch.cuda.get_device_name() if self.device == "cuda" else "cpu"}

    def timed(self, phase: str, fn: Callable[[], Any]) -> Any:
        result, seconds = timed_call(fn, self.device)
        self.phases[phase] = round(seconds, 4)
        return result

    def run(self) -> dict[str, Any]:
        exp = self.exp
        w = self.timed("build_s", lambda: build(exp, self.device))
        model, inputs = w.model.eval(), w.batches[0].inputs
        forward = forward_fn(exp, self.device)
        with torch.no_grad():
            call = getattr(self, f"_{self.name}")(model, inputs, forward)
            if call is None:  # a build step: it made an artifact, there is nothing to run
                return self._report()
            built_before = self._cpp_kernels()
            first = self.timed("first_call_s", lambda: call(model, *inputs))
            if built_before is not None and self.name != "eager":
                # how many C++ kernels the first call had to build with g++: none where a cache held them all
                self.out["cpp_kernels_built"] = self._cpp_kernels() - built_before
            self._steady(lambda: call(model, *inputs))
            self._check(first)
        return self._report()

    # --- each way to a callable; the time it takes is one or more phases ------------------------------------
    def _eager(self, model, inputs, forward):
        return forward

    def _warm(self, model, inputs, forward):
        """torch.compile as people call it; cold or warm is the cache directories the lab side gave this process."""
        compiled = torch.compile(model)

        def call(model, *inputs):
            return forward(compiled, *inputs)
        return call

    def _cold(self, model, inputs, forward):
        self._after_steady = self._save_mega_cache
        return self._warm(model, inputs, forward)

    def _mega_cache(self, model, inputs, forward):
        """The Run page's cache=artifacts: the cold rung's bundle loaded into fresh cache folders (on the CPU the
        Mega-Cache alone would leave every C++ kernel to build again: most of a CPU compile)."""
        self._require("mega_cache")
        path = self.workdir / MEGA_CACHE
        self.out["artifact_bytes"] = path.stat().st_size
        restored = self.timed("load_s", lambda: compile_artifacts.load_bundle(path))
        if restored:
            self.out["cpp_kernels_loaded"] = restored
            self.out["notes"].append(f"{restored} C++ kernel(s) shipped beside the Mega-Cache, which leaves them out, "
                                     "as the Run page's cache=artifacts ships them")
        return self._warm(model, inputs, forward)

    def _aot_build(self, model, inputs, forward):
        self._require("aot_compile")
        try:
            compiled = self.timed("compile_s", lambda: torch.compile(forward, fullgraph=True).aot_compile(
                ((model, *inputs), {})))
        except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as e:  # a break: it takes one graph only
            raise Unavailable("aot_compile needs the model in one graph (fullgraph=True), and Dynamo broke it: "
                              + str(e).strip().splitlines()[0]) from e
        path = self.workdir / AOT_FUNCTION
        self.timed("save_s", lambda: compiled.save_compiled_function(str(path)))
        self.out["artifact_bytes"] = path.stat().st_size
        return None

    def _aot_load(self, model, inputs, forward):
        self._require("aot_compile")
        path = self.workdir / AOT_FUNCTION

        def load():
            with open(path, "rb") as f:
                return torch.compiler.load_compiled_function(f)
        self.out["artifact_bytes"] = path.stat().st_size
        return self.timed("load_s", load)

    def _aoti_build(self, model, inputs, forward):
        self._require("aoti")
        if PRECISIONS[self.exp.precision].autocast:
            raise Unavailable(f"precision {self.exp.precision} runs under autocast, which an exported program does not "
                              "carry here: choose fp32, bf16 or fp16 weights")
        try:
            program = self.timed("export_s", lambda: torch.export.export(model, tuple(inputs)))
        except Exception as e:  # torch.export's refusal is the finding: say it, in its own words
            raise Unavailable(f"torch.export does not take this model: {type(e).__name__}: "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
        path = self.workdir / AOTI_PACKAGE
        self.timed("compile_s", lambda: torch._inductor.aoti_compile_and_package(program, package_path=str(path)))
        self.out["artifact_bytes"] = path.stat().st_size
        return None

    def _aoti_load(self, model, inputs, forward):
        self._require("aoti")
        path = self.workdir / AOTI_PACKAGE
        self.out["artifact_bytes"] = path.stat().st_size
        package = self.timed("load_s", lambda: torch._inductor.aoti_load_package(str(path)))

        def call(model, *inputs):  # the package holds the weights: the model is not needed to run it
            return package(*inputs)
        return call

    # --- after the first result ---------------------------------------------------------------------------------
    _after_steady: Callable[[], None] | None = None

    def _require(self, feature: str) -> None:
        """Unavailable, saying why, where this torch lacks `feature`. Its check imports what the way needs
        (AOTInductor's: torch._inductor, a second or more): those seconds count with the step's imports."""
        t0 = time.perf_counter()
        reason = features.missing(feature)
        self.phases["imports_s"] = round(self.phases["imports_s"] + time.perf_counter() - t0, 4)
        if reason:
            raise Unavailable(reason)

    def _cpp_kernels(self) -> int | None:
        """How many C++ kernels this process's Inductor cache folder holds (the CPU's); None on a GPU."""
        return len(compile_artifacts.cpp_kernels()) if self.device == "cpu" else None

    def _save_mega_cache(self) -> None:
        """After the cold compile: what a new machine would be shipped (its size, and how long saving took): the
        bundle the Run page's runs save, the Mega-Cache and the CPU's C++ kernels (tcore.worker.compile_artifacts)."""
        if not features.available("mega_cache"):
            self.out["notes"].append(features.missing("mega_cache"))
            return
        t0 = time.perf_counter()
        size = compile_artifacts.save_bundle(self.workdir / MEGA_CACHE)
        self.phases["save_s"] = round(time.perf_counter() - t0, 4)
        if size is None:
            self.out["notes"].append("save_cache_artifacts saved nothing: no compile went through a cache it bundles")
            return
        self.out["mega_cache_bytes"] = size

    def _steady(self, step: Callable[[], Any]) -> None:
        """Median step time after a short warm-up, as samples per second: what the artifact runs at once started."""
        exp = self.exp
        for _ in range(2):
            step()
        times, t_end = [], time.perf_counter() + exp.timed_s
        while True:  # timed_steps steps if given, else at least 3 and until timed_s is spent
            times.append(timed_call(step, self.device)[1])
            if len(times) >= (exp.timed_steps or 3) and (exp.timed_steps or time.perf_counter() >= t_end):
                break
        step_s = statistics.median(times)
        self.out.update(step_ms=round(step_s * 1e3, 4), samples_per_s=round(exp.batch_size / step_s, 3),
                        timed_steps=len(times))
        if self._after_steady:
            self._after_steady()

    def _check(self, first) -> None:
        path = self.workdir / REFERENCE
        if self.name == "eager":
            torch.save(clone(first), path)
            return
        if not path.exists():
            self.out["notes"].append("no eager reference to compare with (run the eager step first)")
            return
        self.out.update(compare(clone(first), torch.load(path), self.exp.precision))

    def _report(self) -> dict[str, Any]:
        phases = self.phases
        if "first_call_s" in phases:
            # process start to first result: the imports, the model, any artifact load, the first call
            phases["first_result_s"] = round(sum(phases.get(k, 0.0) for k in
                                                 ("interpreter_s", "imports_s", "build_s", "load_s",
                                                  "first_call_s")), 4)
            # what the first call cost beyond one steady step: the compile, or the load's rest
            if "step_ms" in self.out:
                phases["first_call_extra_s"] = round(max(phases["first_call_s"] - self.out["step_ms"] / 1e3, 0.0), 4)
        self.out["phases"] = phases
        return self.out


def run_step(name: str, exp: Experiment, workdir: Path) -> dict[str, Any]:
    if name not in STEPS:
        raise ValueError(f"unknown ladder step {name!r}; choose one of: {', '.join(STEPS)}")
    step = Step(name, exp, workdir)
    try:
        return step.run()
    except Unavailable as e:
        return {**step.out, "phases": step.phases, "unavailable": str(e)}


def main(argv: list[str]) -> int:
    from sample_models.sources import file_models

    # a step is a worker's fresh process: a model file's code runs here (the lab checked that it may: probes, cli)
    file_models.allow_imports()
    name, spec_json, workdir = argv
    result = run_step(name, Experiment.from_json(spec_json), Path(workdir))
    sync(result["device"])
    print("LADDER " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
