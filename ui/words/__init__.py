"""The words beside the figures: headlines, states, verdicts, tables and explanations, as plain strings and rows.
No Streamlit and no Plotly here, so every sentence can be unit-tested."""
