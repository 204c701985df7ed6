"""Streamlit UI pieces shared by the pages; the chart and words modules stay free of Streamlit."""
