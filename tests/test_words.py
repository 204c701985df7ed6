"""The words beside the charts (ui.words.run_words, ui.words.graph_words, ui.words.sweep_matrix, ui.words.run_state's
queue words), on hand-made results: what compile did, correctness, payback, the best setting, graph breaks."""
import pandas as pd
import pytest

from tcore import figures
from tcore.analysis.advice import inside_torch
from tests.chart_data import cpu_eager_only, gpu_result  # noqa: F401 (fixtures)
from ui.words import diagnose_queries, graph_words, run_state, run_words, sweep_matrix


def test_graph_words_name_breaks_and_recompiles(gpu_result):
    words = "\n".join(graph_words.graph_words(gpu_result))
    assert "Dynamo compiled **3 graphs**: 2 pieces of the model between its graph breaks, plus 1 recompilation" in words
    assert "**1 graph break**, counted by place in the code" in words
    assert ("- graph break: Unsupported Tensor.item() call with capture_scalar_outputs=False; Dynamo met it 4 times"
            in words)
    assert "Explanation" not in words  # only the headline line of torch's message
    assert "recompile 0/1 of `forward`: tensor 'x' size mismatch at index 1. expected 32, actual 128" in words


def test_graph_words_say_where_a_break_is_and_count_kernels():
    words = graph_words.graph_words({
        "graph_count": 2, "graph_break_count": 1, "eager_kernels_per_step": 67, "compiled_kernels_per_step": 12,
        "graph_breaks": [{"reason": "Unsupported Tensor.item() call", "count": 1, "line": 74,
                          "file": "/repo/sample_models/captioner.py", "source": "if x.abs().mean().item() > 1e4:"}]})
    assert ("- graph break at `captioner.py:74` (`if x.abs().mean().item() > 1e4:`): Unsupported Tensor.item() "
            "call") in words
    assert "Kernels launched per step: 67 eager, 12 compiled (fusion merged them)." in words


def test_kernel_counts_of_a_backend_that_keeps_eagers_kernels_credit_no_fusion():
    """aot_eager runs said "(fusion merged them)" for 51 -> 50 kernels, while the same page said nothing is fused."""
    counts = {"device": "cpu", "eager_kernels_per_step": 2382, "compiled_kernels_per_step": 442}
    for backend in ("aot_eager", "eager"):
        (line,) = [w for w in graph_words.graph_words(counts, backend) if w.startswith("Kernels launched")]
        assert "fusion merged" not in line and f"nothing is fused: backend={backend} runs eager's own kernels" in line
    same = {**counts, "compiled_kernels_per_step": 2382}
    assert "the same kernels as eager" in graph_words.graph_words(same, "aot_eager")[0]
    assert "(fusion merged them)" in graph_words.graph_words(counts, "inductor")[0]


def test_graph_words_name_the_recompile_limit():
    words = graph_words.graph_words({"recompile_count": 2, "recompiles": [
        {"compile_id": "0/1", "frame": "forward", "reason": "0/0: tensor 'tokens' size mismatch at index 1"},
        {"compile_id": "0/2", "frame": None, "reason": "0/1: tensor 'tokens' size mismatch at index 1"}]})
    assert "- recompile 0/1 of `forward`: tensor 'tokens' size mismatch at index 1" in words
    assert "- 0/2: the recompile limit was hit, no compile: tensor 'tokens' size mismatch at index 1" in words


def test_cuda_graph_skips_on_the_cpu_say_why_and_on_a_gpu_give_torchs_reason():
    cpu = graph_words.graph_words({"device": "cpu", "cudagraph_skip_count": 2, "cudagraph_skip_reasons": []})
    assert cpu == ["CUDA graphs were skipped 2 time(s): there are no CUDA graphs on the CPU, so reduce-overhead and "
                   "max-autotune run without them here."]
    gpu = graph_words.graph_words({"device": "cuda", "cudagraph_skip_count": 1,
                               "cudagraph_skip_reasons": ["skipping cudagraphs due to mutated inputs (1 instances)"]})
    assert gpu == ["CUDA graphs were skipped 1 time(s): skipping cudagraphs due to mutated inputs (1 instances)."]
    assert "torch gave no reason" in graph_words.graph_words({"device": "cuda", "cudagraph_skip_count": 1})[0]


def test_graph_words_for_a_clean_compile():
    words = graph_words.graph_words({"graph_count": 1, "graph_break_count": 0, "graph_breaks": [],
                                 "recompile_count": 0, "recompiles": []})
    assert words == ["Dynamo captured 1 graph with no graph breaks.", "No recompilations."]


def test_correctness_and_payback_words(gpu_result):
    ok, text = run_words.correctness_words(gpu_result, "float32")
    assert ok and "within the float32 tolerance of 0.001" in text
    bad = {**gpu_result, "correctness_ok": False, "correctness_rel_diff": 0.2}
    assert run_words.correctness_words(bad, "float32")[1].startswith("Compiled output DIFFERS")
    assert run_words.correctness_words({}, "float32")[0] is None
    assert "11,144 steps" in run_words.payback_words(gpu_result)  # 11.24 s / (1/124.8 s - 1/(124.8 x 1.144) s)
    assert run_words.payback_words({"breakeven_steps": None}) is None
    # A quick pay-back is said in ms, never "about 0 s": 123 steps of a 1 ms eager step at 2x take 62 ms.
    quick = {"speedup": 2.0, "compile_s": 0.0615, "eager_steps_per_s": 1000.0, "breakeven_steps": 123.0}
    assert "after 123 steps, about 62 ms of compiled running" in run_words.payback_words(quick)
    # It follows the headline: slower at 0.74x, it pays back never, whatever was stored.
    assert run_words.payback_words({**quick, "speedup": 0.74}) is None


def test_headline_gives_units_or_the_reason(gpu_result, cpu_eager_only):
    assert run_words.headline(gpu_result)["speedup"] == ("1.14 x", None)
    assert run_words.headline(gpu_result)["compile_s"] == ("11.2 s", None)
    assert run_words.headline(cpu_eager_only)["speedup"] == ("n/a", "nothing is compiled in this run (compile=off)")


def test_best_setting_names_fastest_and_soonest_payback():
    matrix = pd.DataFrame([
        {"setting": "whole · max-autotune", "speedup": 1.6, "compile_s": 90.0, "breakeven_steps": 5000.0},
        {"setting": "regional · default", "speedup": 1.3, "compile_s": 9.0, "breakeven_steps": 700.0},
        {"setting": "off (eager)", "speedup": None, "compile_s": None, "breakeven_steps": None},
    ])
    text = sweep_matrix.best_setting(matrix)
    assert text.startswith("Fastest: **whole · max-autotune**, 1.60x eager after 90.0 s")
    assert "Pays back soonest: **regional · default**" in text
    assert sweep_matrix.best_setting(matrix.iloc[2:]) is None


def test_best_setting_gives_its_spread_and_names_the_settings_it_cannot_be_told_from():
    matrix = pd.DataFrame([
        {"setting": "whole · default", "speedup": 1.50, "speedup_min": 1.20, "speedup_max": 1.90, "compile_s": 20.0,
         "breakeven_steps": 900.0},
        {"setting": "regional · default", "speedup": 1.40, "speedup_min": 1.25, "speedup_max": 1.45, "compile_s": 8.0,
         "breakeven_steps": 400.0},
        {"setting": "whole · lite", "speedup": 1.05, "speedup_min": 1.00, "speedup_max": 1.10, "compile_s": 6.0,
         "breakeven_steps": None},
    ])
    text = sweep_matrix.best_setting(matrix)
    assert text.startswith("These runs **cannot tell apart** **whole · default** (1.50x, 1.20–1.90x), **regional · "
                           "default** (1.40x, 1.25–1.45x): their rounds overlap, so none of them is named the fastest.")
    assert "whole · lite**" not in text
    assert sweep_matrix.best_setting(matrix.drop(index=1)).startswith(
        "Fastest: **whole · default**, 1.50x eager (rounds 1.20–1.90x) after 20.0 s")


def test_break_grouping_strategies_and_queue_words():
    breaks = [{"reason": "Unsupported Tensor.item() call\n  Explanation: ...", "file": "/r/captioner.py", "line": 74,
               "count": 1, "skipped_frame": True, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"},
              {"reason": "Unsupported Tensor.item() call", "file": "/r/captioner.py", "line": 74, "count": 1,
               "skipped_frame": False, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"},
              {"reason": "Unsupported Tensor.item() call", "file": "/r/captioner.py", "line": 97, "count": 1,
               "skipped_frame": False, "source": "if x.abs().mean().item() > 1e4:", "hint": "Hint: x"}]
    grouped = graph_words.group_breaks(breaks)
    assert [(b["line"], b["count"], b["skipped_frame"]) for b in grouped] == [(74, 2, True), (97, 1, False)]
    assert graph_words.break_title(grouped[0]) == "`captioner.py:74`: Unsupported Tensor.item() call (hit 2 times)"

    assert [diagnose_queries.strategy_of({"shape_count": 6, **changes})
            for _, changes, _ in diagnose_queries.STRATEGIES.values()] == list(diagnose_queries.STRATEGIES)
    assert diagnose_queries.strategy_of({"shape_count": 0, "dynamic": False}) is None
    assert figures.compile_totals([{"kind": "compile", "duration_s": 0.5}, {"kind": "recompile", "duration_s": 0.25},
                                   {"kind": "limit", "duration_s": 0.01}]) == {"compilations": 2, "compiling_s": 0.75}

    from tcore.lab.queue.waiting import Wait, wait_words

    assert (run_state.queue_words(2, Wait(95.0, 1200.0), 12.0)
            == "#2 in the queue · starts in about 1 min 30 s · waited 12 s")
    assert "no estimate yet" in run_state.queue_words(1, None, 0.0)
    assert wait_words(Wait(None, 180.0, "a run ahead has run 12 min, past the 40 s that runs like it took"))[0] \
        == "no estimate: a run ahead is overdue"  # about the run ahead: not "late", which read as this run being late
    assert "starts within 3 min" in wait_words(Wait(None, 180.0, "a run ahead has run 12 min, past the 40 s"))[1]


def test_whose_run_it_is_reads_as_the_name_its_owner_chose():
    from ui.panels import people, queue

    assert queue.whose("ada~3f9a", "ada~3f9a") == "yours"
    assert queue.whose("ada~3f9a", "guest-0badc0") == "ada (3f9a)"
    assert queue.whose("guest-0badc0", "ada~3f9a") == "guest 0bad"
    assert queue.whose("host:123", "abc") == "the command line"
    assert queue.whose("9f1c0e", "abc") == "another session"  # a session id from before names
    secret = "0123456789abcdef"
    assert queue.whose(f"guest-0bad.{secret}", "ada~3f9a") == "guest 0bad"  # the secret is never shown
    assert queue.whose(f"ada~0bad.{secret}", "x") == "ada (0bad)"
    # Two people of one name read apart, by the four digits docs/room.md says are shown; the secret never is.
    other_ada = queue.whose(f"ada~1c2d.{secret}", "x")
    assert other_ada == "ada (1c2d)" and secret not in other_ada
    assert people.owner_for("  Ada Lovelace! ", f"guest-0bad.{secret}") == f"ada-lovelace~0bad.{secret}"
    assert people.owner_for("Ada", f"ada-l~0bad.{secret}") == f"ada~0bad.{secret}"  # a new name keeps tag and secret
    assert people.owner_for("!!", f"guest-0bad.{secret}") is None


def test_break_pair_words_say_what_the_break_cost():
    clean = {"graph_count": 1, "compiled_samples_per_s": 5591.7, "compile_s": 18.2}
    broken = {"graph_count": 6, "compiled_samples_per_s": 4192.3, "compile_s": 17.7}
    assert graph_words.break_pair_words(clean, broken) == ("With the break, Dynamo captured **6 graphs** instead of 1; "
                                                       "the model runs at **75%** of the throughput; compiling took "
                                                       "17.7 s instead of 18.2 s.")
    assert graph_words.break_pair_words({"graph_count": 1}, {"graph_count": 3}) == \
        "With the break, Dynamo captured **3 graphs** instead of 1."


def test_the_baseline_sentence_says_which_precision_and_layout_eager_ran_in():
    from ui.words.run_words import baseline_words

    tuned = baseline_words({"model": "resnet50", "precision": "bf16", "channels_last": True}, "cuda")
    assert "**bf16**" in tuned and "channels_last**, as people tune a CNN" in tuned
    assert "Eager runs in **NCHW**" in baseline_words({"model": "resnet50", "channels_last": False}, "cuda")
    nchw = {"model": "resnet50", "channels_last": False}
    assert "part of this speedup is the channels_last layout" in baseline_words(nchw, "cuda", 1.9)
    assert "speedup" not in baseline_words(nchw, "cpu", 0.54)  # slower: there is no speedup for the layout to explain
    assert "NCHW" not in baseline_words({"model": "flux", "precision": "bf16"}, "cuda")
    assert "runs as fp32" in baseline_words({"model": "flux", "precision": "tf32"}, "cpu")


def test_a_break_inside_pytorch_says_so_instead_of_torchs_hint():
    """A compiled optimizer's break at torch/optim/optimizer.py came with the hint
    "Remove the torch._dynamo.graph_break() call", which is PyTorch's own, on purpose."""
    optimizer = {"file": "/usr/lib/python3.12/site-packages/torch/optim/optimizer.py", "line": 79,
                 "hint": "Hint: Remove the torch._dynamo.graph_break() call."}
    assert inside_torch(optimizer["file"]) == "torch/optim/optimizer.py"
    assert "on purpose, before every optimizer step" in graph_words.torch_break_words(optimizer)
    other = {"file": "/opt/venv/lib/python3.11/dist-packages/torch/nn/modules/module.py", "line": 1}
    assert ("inside PyTorch itself (torch/nn/modules/module.py), not in your code"
            in graph_words.torch_break_words(other))
    assert graph_words.torch_break_words({"file": "/work/main/sample_models/captioner.py", "line": 120}) is None


def test_a_card_says_one_percentage_per_question_the_speedups():
    """"Speedup 1.55x" sat beside "Compiled samples/s ... +43% vs eager" (the ratio of the two median throughputs,
    7% from the paired headline): a card gives its percentage only where it is the Speedup's own, else none, and the
    tile's help says what the two throughputs give and what the Speedup is."""
    walk = {"variants": ["eager", "compiled"], "speedup": 1.55, "speedup_of_medians": 1.43,
            "eager_samples_per_s": 100.0, "compiled_samples_per_s": 143.0}
    _, (eager, compiled) = run_words.headline_tiles(walk)
    assert (eager["value"], compiled["value"]) == ("100.0", "143.0")
    assert compiled["delta"] is None  # not "+43% vs eager" beside 1.55x
    assert "these two throughputs give 1.43x, the Speedup above 1.55x" in compiled["help"]
    assert "median of each round's own ratio" in compiled["help"]
    slower = {"variants": ["eager", "compiled"], "speedup": 0.54, "eager_samples_per_s": 114.7,
              "compiled_samples_per_s": 75.4}
    assert run_words.headline_tiles(slower)[1][1]["delta"] is None  # not "-34%" beside 0.54x
    agreeing = {**walk, "speedup": 1.432}  # the same whole percent both ways: the percentage stands, and is checkable
    compiled = run_words.headline_tiles(agreeing)[1][1]
    assert compiled["delta"] == "+43% vs eager" and "gives the same" in compiled["help"]
    assert figures.change_pct(walk, "samples_per_s") == pytest.approx(43.0)
    assert figures.change_pct({"eager_samples_per_s": None, "compiled_samples_per_s": 3.0}, "samples_per_s") is None


def test_a_generate_card_says_no_percentage_beside_another_decode_speedup():
    """"Decode speedup 0.98x" sat beside "-10% vs eager" on the compiled tokens/s tile."""
    pytest.importorskip("streamlit")  # the panel's module draws with it (absent on the GPU machine)
    from ui.panels import generate

    walk = {"variants": ["eager", "compiled"], "speedup": 0.98, "eager_tokens_per_s": 100.0,
            "compiled_tokens_per_s": 90.0, "eager_decode_tokens_per_s": 100.0}
    top, bottom = generate.headline_tiles(walk)
    assert top[0]["label"] == "Decode speedup" and top[0]["value"] == "0.98 x"
    assert bottom[1]["delta"] is None
    assert "these two throughputs give 0.90x, the Speedup above 0.98x" in bottom[1]["help"]
    same = {**walk, "compiled_tokens_per_s": 98.0}
    assert generate.headline_tiles(same)[1][1]["delta"] == "-2% vs eager"


def test_time_to_first_token_is_shown_at_three_significant_digits():
    """"422.01 ms" beside "eager 600.00": hundredths of a millisecond a timer on a busy CPU cannot hold."""
    pytest.importorskip("streamlit")
    from ui.panels import generate

    ttft = generate.headline_tiles({"variants": ["eager", "compiled"], "compiled_ttft_ms": 422.01,
                                    "eager_ttft_ms": 600.0})[0][1]
    assert (ttft["value"], ttft["delta"]) == ("422", "eager 600")
    fast = generate.headline_tiles({"compiled_ttft_ms": 8.4213, "eager_ttft_ms": 12.04})[0][1]
    assert (fast["value"], fast["delta"]) == ("8.42", "eager 12")


def far_apart(**more) -> dict:
    """A run whose paired speedup (1.53x) and ratio of median throughputs (100 -> 395 samples/s: 3.95x) disagree."""
    return {"variants": ["eager", "compiled"], "speedup": 1.53, "speedup_low": 1.49, "speedup_high": 1.58,
            "speedup_pm_pct": 3.3, "speedup_confidence_pct": 96.9, "paired_rounds": 6, "speedup_of_medians": 3.95,
            "speedup_p50": 1.6, "eager_samples_per_s": 100.0, "compiled_samples_per_s": 395.0,
            "eager_steps_per_s_min": 3.1, "eager_steps_per_s_max": 12.5, **more}


def test_a_card_whose_two_speedups_disagree_shows_one_and_says_why_the_other_differs():
    """"Speedup 1.53 x" sat above "+295% vs eager", and a box called 1.53x "by throughput" beside a throughput
    ratio of 3.95x: the card keeps the speedup, drops the percentage, and one sentence says why the two differ."""
    top, (eager, compiled) = run_words.headline_tiles(far_apart())
    assert top[0]["value"] == "1.53 x" and compiled["delta"] is None  # not "+295% vs eager"
    assert "these two throughputs give 3.95x, the Speedup above 1.53x" in compiled["help"]
    gap = figures.unpaired_gap(far_apart())
    assert gap.startswith("**The two throughputs give 3.95x; the speedup is 1.53x.**")
    assert "the two medians came from different rounds" in gap and "eager's from 3.1 to 12.5 steps/s" in gap
    # whether to trust it: the speedup's own rounds agree here, so it holds; with a wide interval, neither does
    assert "The speedup's own rounds agree (95% interval 1.49–1.58x), so it holds" in gap
    wide = figures.unpaired_gap(far_apart(speedup_low=0.9, speedup_high=4.2, speedup_pm_pct=175.0))
    assert "read neither figure as solid" in wide and "so it holds" not in wide
    assert "unpaired, reads" not in figures.speedup_words(far_apart())  # said once, by the sentence above
    assert "By throughput" not in figures.disagreement(far_apart(speedup_p50=2.4))
    # close together, no box; the percentage stands only where it is the Speedup's own too
    near = far_apart(speedup_of_medians=1.58, compiled_samples_per_s=158.0)
    assert figures.unpaired_gap(near) is None and run_words.headline_tiles(near)[1][1]["delta"] is None
    assert run_words.headline_tiles({**near, "speedup": 1.58})[1][1]["delta"] == "+58% vs eager"


def generated(**more) -> dict:
    """A generate run: compiled 56.1 against eager 126.4 tokens/s over a batch of 8, a paired decode speedup 0.55x."""
    return {"variants": ["eager", "compiled"], "speedup": 0.55, "speedup_of_medians": 56.1 / 126.4,
            "eager_tokens_per_s": 126.4, "compiled_tokens_per_s": 56.1, "eager_decode_tokens_per_s": 15.8,
            "compiled_decode_tokens_per_s": 7.0, "compile_s": 8.2, "compile_prefill_s": 1.2,
            "compile_decode_s": 7.0, "timeline_compile_s": 13.0, **more}


def test_generate_tiles_take_the_percentage_from_the_tokens_shown_and_say_they_are_the_batch_s():
    from ui.panels import generate

    (_, _, compile_tile), (eager, compiled, _) = generate.headline_tiles(generated(speedup=0.444))
    assert compiled["delta"] == "-56% vs eager"  # 56.1 / 126.4, the paired speedup's own -56% too
    assert generate.headline_tiles(generated(speedup=0.45))[1][1]["delta"] is None  # not -56% beside 0.45x
    assert eager["delta"] == "all 8 sequences" and "over the whole batch" in eager["help"]
    assert "The timeline's compile phase (13.0 s) is longer" in compile_tile["help"]
    assert "first compiled generation minus an eager one" in compile_tile["help"]
    # the paired 0.55x is 24% from the tiles' 0.44x: the card shows the speedup alone, and says why
    _, (_, compiled, _) = generate.headline_tiles(generated())
    assert compiled["delta"] is None and "these two throughputs give 0.44x" in compiled["help"]


def test_each_compile_scope_says_what_it_compiled_and_with_which_call():
    from ui.panels.results import scope_words

    blocks = {"regional_blocks": {"Block": 4}, "regional_call": "block.compile"}
    hierarchical = scope_words(blocks, {"compile": "hierarchical"})  # recorded as block.compile by older workers
    assert "`torch.compiler.nested_compile_region`" in hierarchical
    assert "one `torch.compile` of the whole model" in hierarchical
    assert "Regional" not in hierarchical and "block.compile()" not in hierarchical
    assert "nested_compile_region" in scope_words({**blocks, "regional_call": "nested_compile_region"},
                                                  {"compile": "hierarchical"})
    regional = scope_words(blocks, {"compile": "regional"})
    assert regional.startswith("**Regional compilation** compiled 4 blocks of 1 class(es) with `block.compile()` on "
                               "each")
    own = scope_words({**blocks, "regional_call": "compile_repeated_blocks"}, {"compile": "regional"})
    assert "the model's own `compile_repeated_blocks()`" in own
    assert scope_words({}, {"compile": "whole"}).startswith("**Whole-model compilation**: one `torch.compile(model)`")
    assert "prefill and the decode step" in scope_words({}, {"compile": "whole", "task": "generate"})
    assert scope_words({}, {"compile": "off"}) == ""


def test_a_generate_run_s_compiler_words_count_the_shorter_prompt_s_recompilation():
    """One line said a shorter prompt caused a recompilation while "What the compiler did" said none."""
    words = graph_words.graph_words({"graph_count": 2, "recompile_count": 0, "recompiles": [], "prompt_recompiles": 1,
                                     "prompt_recompile_reasons": ["0/1: tensor 'tokens' size mismatch at index 1. "
                                                                  "expected 4, actual 3"]})
    assert "No recompilations in the first compiled generation." in words
    assert ("After the timing, one more generation with a prompt one token shorter caused 1 recompilation: tensor "
            "'tokens' size mismatch at index 1. expected 4, actual 3.") in words
    assert "No recompilations." in graph_words.graph_words({"recompile_count": 0})  # not a generate run: unchanged


def test_torch_s_own_optimizer_break_is_labelled_as_torch_s_in_the_list_of_breaks():
    """The compiled optimizer's deliberate break at torch/optim/optimizer.py was listed as a break in the model."""
    result = {"graph_count": 3, "graph_break_count": 2, "graph_breaks": [
        {"reason": "Call to `torch._dynamo.graph_break()`", "count": 1, "line": 78,
         "file": "/work/main/.venv/lib/python3.11/site-packages/torch/optim/optimizer.py",
         "source": "torch._dynamo.graph_break()"},
        {"reason": "Unsupported Tensor.item() call", "count": 1, "line": 74,
         "file": "/work/sample_models/captioner.py"}]}
    words = "\n".join(graph_words.graph_words(result))
    assert "1 inside PyTorch itself, not in the model" in words
    torch_line = next(w for w in graph_words.graph_words(result) if "optimizer.py" in w)
    assert "`torch/optim/optimizer.py:78`" in torch_line and "PyTorch's own break, on purpose" in torch_line
    mine = next(w for w in graph_words.graph_words(result) if "captioner.py" in w)
    assert "PyTorch" not in mine


def test_a_suggestion_s_counterpart_says_how_its_speedup_compares_and_equal_kernel_counts_are_explained():
    from ui.panels.why_faster import pair_words

    before = {"speedup": 1.93, "speedup_low": 1.85, "speedup_high": 2.0}
    after = {"speedup": 1.14, "speedup_low": 1.1, "speedup_high": 1.2}
    words = pair_words(before, after)
    assert "Speedup 1.93x (1.85–2.00) before, 1.14x (1.10–1.20) after: **slower**, beyond both" in words
    assert "cannot tell" in pair_words(before, {"speedup": 1.9, "speedup_low": 1.5, "speedup_high": 2.2})
    assert pair_words(before, {"speedup": None}) is None
    same = "\n".join(graph_words.graph_words({"device": "cpu", "eager_kernels_per_step": 51,
                                              "compiled_kernels_per_step": 51}))
    assert "Kernels launched per step: 51 eager, 51 compiled (no fewer: on the CPU this counts" in same


def test_a_sweep_crowns_no_setting_that_compiled_nothing_nor_one_a_run_without_an_interval_could_match():
    """A sweep of aot_eager runs read "Fastest: whole · default · dynamic auto, 5.52x eager (95% interval
    0.00–2392901.31x)" beside a 1.02x run with no interval: neither compiled code, and the two cannot be told apart."""
    wide = {"speedup_low": 1e-5, "speedup_high": 2.39e6}
    matrix = pd.DataFrame([
        {"setting": "whole · default", "speedup": 5.52, **wide, "compile_s": 3.0, "breakeven_steps": None,
         "compiled_nothing": "backend aot_eager"},
        {"setting": "regional · default", "speedup": 1.02, "speedup_low": None, "speedup_high": None,
         "compile_s": 2.0, "breakeven_steps": None, "compiled_nothing": "backend aot_eager"},
    ])
    text = sweep_matrix.best_setting(matrix)
    assert text.startswith("None of these settings compiled code (backend aot_eager") and "Fastest" not in text
    compiled = matrix.assign(compiled_nothing="")
    text = sweep_matrix.best_setting(compiled)
    assert "cannot tell apart" in text and "or a run has none of its own" in text and "Fastest" not in text


def test_the_layout_sentence_names_inductor_only_where_inductor_ran():
    """An aot_eager (or eager, or compile-off) run generates no code, so no layout of Inductor's explains its
    speedup; the sentence says both sides ran eager's layout instead."""
    from ui.words.run_words import baseline_words

    for spec in ({"model": "resnet50", "channels_last": False, "backend": "aot_eager"},
                 {"model": "resnet50", "channels_last": True, "backend": "eager"},
                 {"model": "resnet50", "channels_last": False, "compile": "off"}):
        words = baseline_words(spec, "cpu", 1.4)
        assert "Inductor" not in words, spec
        assert "nothing was compiled to code" in words
    assert "Eager and compiled both run in **NCHW**" in baseline_words(
        {"model": "resnet50", "backend": "aot_eager"}, "cpu", 1.4)
    assert "Inductor picks" in baseline_words({"model": "resnet50", "backend": "inductor"}, "cpu", 1.4)


def test_a_rate_is_said_in_three_significant_digits_and_its_unit_agrees():
    """A 2,761 ms warm-up step at batch 2 read "1 samples/s" for 0.72 samples/s."""
    from ui.words.compare_verdicts import rate_words

    assert rate_words(2 / 2.761) == "0.724 samples/s"
    assert rate_words(1.0) == "1 sample/s" and rate_words(42.13) == "42.1 samples/s"
    assert rate_words(3184.6) == "3,185 samples/s"
