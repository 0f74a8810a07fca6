"""Workloads: what is asked. Prompts are data shipped in the package; records keep only their ids."""
