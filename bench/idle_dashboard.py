"""The dashboard with an executor that runs nothing, for the dashboard benchmarks: trials
stay queued (the experiment stays live) unless the benchmark plays the workers itself.

``SERVER.format(port=...)`` is a program for ``python -c``."""

SERVER = """
from dashboard import create_app
from dnnframe.executors import Executor

class Idle(Executor):
    def submit(self, packs, compile_keys=None): pass
    def wait(self, timeout=None): return True
    def cancel(self, experiment_id): return 0
    def shutdown(self, wait=True): pass

create_app({{"EXECUTOR": Idle()}}).run(host="127.0.0.1", port={port}, threaded=True)
"""
