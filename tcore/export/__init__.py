"""A run written out for use elsewhere: copy as code (snippet.py; snippet_generate.py for a generate run), a short
program that compiles and times a model the way the run did. Imported by the app's Code tab; never by the worker.
"""
