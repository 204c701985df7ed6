"""Streamlit UI pieces shared by the pages; ui.charts and ui.tables stay free of Streamlit."""
