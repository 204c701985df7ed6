"""What the lab allows: the instructor's limits and passcode, and the memory estimate that refuses a run too big for
its device before it queues.
"""
