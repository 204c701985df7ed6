"""Inside the worker process: build the model, compile it, time eager against compiled, profile it, read power.

The lab side starts it by module name (`python -m tcore.worker`, see __main__.py) in a fresh process
with fresh compile caches, and imports nothing from this folder. The two sides share the experiment and the
protocol between them (tcore.experiment), what the machine is (tcore.host) and the figures of a result
(tcore.figures).
"""
