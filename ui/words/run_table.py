"""The Compare page's table of stored runs: its columns, titled with units, their number formats, and the CSV of them
that a spreadsheet opens as text, never as formulas."""
from __future__ import annotations

import re

import pandas as pd

from tcore import figures

# The figures in the Compare page's run table, as stored columns (tcore.figures).
RUN_TABLE_FIGURES = ["speedup", "speedup_low", "speedup_high", "compile_s",
                     # the run's timeline: submit to result, of it the compile, the lab's own overhead and the waits
                     "timeline_wall_s", "timeline_compile_s", "lab_overhead_s", "timeline_wait_s",
                     "eager_samples_per_s", "compiled_samples_per_s", "breakeven_steps",
                     "eager_energy_j_per_step", "compiled_energy_j_per_step", "compiled_peak_pct", "compiled_idle_ms",
                     # generation runs (task=generate); empty for the others
                     "compiled_tokens_per_s", "compiled_ttft_ms", "compiled_decode_bw_measured_pct",
                     "compiled_decode_bw_pct"]
# The run table: (column of RunStore.dataframe(), title with unit).
# The id right beside the label: two runs of one setting share their label, and only it (and the time) tells
# them apart where a wide table is cut.
RUN_COLUMNS = [("created_at", "Started"), ("label", "Run"), ("id", "Run id"), ("status", "Status"),
               ("device", "Device"), *[(c, figures.column_label(c)) for c in RUN_TABLE_FIGURES],
               ("error_kind", "Error")]


def number_formats(columns: list[str]) -> dict[str, tuple[str, str]]:
    """column -> (its title with unit, its printf format), for st.column_config.NumberColumn."""
    return {c: (figures.column_label(c), figures.lookup(c)[0].fmt) for c in columns}


def run_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The Compare table: the columns above, titled with units, in this order (missing ones empty)."""
    columns = [c for c, _ in RUN_COLUMNS]
    return frame.reindex(columns=columns).rename(columns=dict(RUN_COLUMNS))


# A cell a spreadsheet would read as a formula (OWASP's CSV injection list): a preset named "=HYPERLINK(...)" ran
# in whoever opened the export. A number written as text ("-1.5") is a number to the spreadsheet, not a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_cell(value):
    """`value` as a spreadsheet shows it, never runs it: text that starts like a formula gets a leading quote."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(frame: pd.DataFrame) -> str:
    """`frame` as CSV for a spreadsheet: each text cell (and title) through spreadsheet_cell; numbers and times
    stay as they are."""
    safe = frame.copy()
    for column in frame.columns:
        if not (pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_datetime64_any_dtype(frame[column])):
            safe[column] = frame[column].map(spreadsheet_cell)
    safe.columns = [spreadsheet_cell(str(c)) for c in frame.columns]
    # RFC 4180's CRLF rows: the csv module then quotes a cell holding a bare CR too, which would otherwise end its row
    return safe.to_csv(index=False, lineterminator="\r\n")
