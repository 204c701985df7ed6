"""Streamlit UI pieces shared by the pages; ui.charts and ui.summary stay free of Streamlit."""
