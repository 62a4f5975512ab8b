"""Report generators for FRAME instances: baselines (copy-sample, extractive) and the one-shot LLM."""

from tasks.generate.baselines import GENERATORS, copy_sample, extractive, generate_report

__all__ = ["GENERATORS", "copy_sample", "extractive", "generate_report"]
