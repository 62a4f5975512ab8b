"""Benchmark-guided skill evolution (paper 003 section 5): splits, the evolve loop, locked evaluation."""
