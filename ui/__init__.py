"""What the pages (app_pages/) are drawn from, by kind: words/ (the sentences and tables beside the figures; neither
Streamlit nor Plotly), charts/ (Plotly figures, in one style: charts/style.py; no Streamlit) and panels/ (the parts of
a page, drawn with Streamlit from the words and the charts). A kind leans only on the kinds before it
(tests/test_import_graph.py)."""
