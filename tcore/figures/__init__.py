"""The figures of a run, each defined once, and the arithmetic that derives some of them from others.

A figure is a field of `RunFigures` (one value per run) or of `VariantFigures` (one value per variant,
eager and compiled), declared with `figure(...)`: its title, unit, format, which way is better and one
sentence on what it means. The worker fills a `Result`; the record stored and read by every page, the
CSV and the command line is its flat form, where a per-variant figure is the column
f"{variant}_{key}" (`eager_samples_per_s`). Adding a figure is one field in fields.py plus the code that
measures it: every table, chart and export reads its title, unit and format from here.

The derived figures (throughput, latency percentiles, energy per step and per sample, speedup,
break-even, TFLOP/s) are pure functions of measured numbers, so they are unit-tested on the CPU
(tcore.figures.derived); the words on how far a headline can be trusted are tcore.figures.verdicts. Both are
reached here too, as figures.summarize, figures.noise_reasons and so on. The definitions themselves are
tcore.figures.fields, which derived.py and verdicts.py import: the package imports its parts, and no part
imports the package.

Beside them, the arithmetic the worker measures with and every reader reads back: paired.py (the headline speedup
from paired rounds), rerun.py (its interval for a rerun) and breakdown.py (where a step's time goes, from a
profiler trace). The worker, the app, the command line and the store all import this package.
"""
from tcore.figures.derived import (  # noqa: F401
                                  EAGER_KERNELS_NO_PAYBACK,
                                  NEVER_PAYS,
                                  Block,
                                  bandwidth_pct,
                                  breakeven_steps,
                                  change_pct,
                                  compile_totals,
                                  copy_bandwidth_tb_s,
                                  decode_bandwidth,
                                  decode_read_bytes,
                                  energy_error_pct,
                                  gpu_time_samples_per_s,
                                  headline_breakeven,
                                  paired_figures,
                                  peak_shares,
                                  percentile,
                                  read_tb_s,
                                  round_speedups,
                                  same_tokens_pct,
                                  slow_step_places,
                                  speedup,
                                  summarize,
                                  upgrade_result,
)
from tcore.figures.fields import (  # noqa: F401
                                  BUSY_CORES,
                                  COMPILE_PHASES,
                                  DISAGREE_PCT,
                                  GENERATE_RUN,
                                  GENERATE_VARIANT,
                                  HIGHER,
                                  HOST_BUSY_PCT,
                                  HOST_IDLE_SHARE,
                                  LOWER,
                                  NOISY_SPREAD_PCT,
                                  PROFILED,
                                  RUN_FIGURES,
                                  SLOW_STEP_FACTOR,
                                  SLOW_TIME_PCT,
                                  SUMMARY_RUN,
                                  SUMMARY_VARIANT,
                                  UNPAIRED_GAP_PCT,
                                  VARIANT_FIGURES,
                                  VARIANTS,
                                  Figure,
                                  Result,
                                  RunFigures,
                                  VariantFigures,
                                  column_label,
                                  figure,
                                  lookup,
                                  summary_keys,
                                  text,
)
from tcore.figures.verdicts import (  # noqa: F401
                                  LEVEL_PCT,
                                  disagreement,
                                  follows_host,
                                  host_bound,
                                  interval_name,
                                  interval_reach,
                                  noise_reasons,
                                  slower_than_eager,
                                  speedup_words,
                                  told_apart,
                                  unpaired_gap,
)
