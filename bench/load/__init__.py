"""The load test's parts (bench/load_test.py runs them): the sessions that submit runs, the app they load, the
faults that land on their work, the report of what the store says happened, and the server's memory over many runs."""
