"""Graph passes -> Program: bind shapes, simplify, lower to kernel calls, plan memory.

Nothing in here imports a GPU library: a Program is plain data that any backend can run.
"""
