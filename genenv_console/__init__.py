"""genenv console: the Textual front end that drives the engine in a thread worker.

The console imports the engine; the engine never imports the console (enforced by import-linter
and tests/test_import_hygiene.py).
"""
