"""Plotly figures, pure functions from records to go.Figure: one run's (run_charts), across runs (compare_charts), the
Diagnose page's (diagnose_charts), all drawn in one style (style: colours, titles, legends, bar labels, "n/a")."""
