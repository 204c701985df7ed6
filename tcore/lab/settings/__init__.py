"""The lab's settings: compile-lab.toml found and read, the constants several lab modules share, and the secrets
the lab's own process keeps from its workers. Imports nothing else of the lab, so every part of it can import this.
"""
