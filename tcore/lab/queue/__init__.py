"""When runs start and how they share a device: the queue's scheduler (one per store in each process), the room's plan
(how many runs share a GPU, the cores kept for the one measuring), the device lease that gives one of them the GPU
alone at a time, the spare workers waiting in free places, and how long a queued run waits.
"""
