"""Compile Lab's engine: experiment spec, compilation, measurement, power, worker process, run store, CLI.

Headless by design: nothing here imports streamlit or plotly.
"""
