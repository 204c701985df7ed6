"""A run's life in the lab process: the API every page and the command line go through (runs), the run followed live
while its worker works and recorded at its end (liverun), the process's registry of runs it follows, and its timeline.
"""
