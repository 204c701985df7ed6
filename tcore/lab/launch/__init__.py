"""Starting a run's worker: a fresh process with fresh caches or a spare started ahead (launcher), forked from a
process that did the imports once on a machine without a GPU (forkserver), or a Ray task on a cluster node (cluster,
remote); and following its events, cancelling it, timing it out.
"""
