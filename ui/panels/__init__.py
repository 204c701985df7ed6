"""The parts of a page, drawn with Streamlit: the knobs, the queue, the live run, the results, the exports, the
people and the instructor, Diagnose's sections. Each draws words (ui.words) and charts (ui.charts)."""
