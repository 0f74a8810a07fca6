"""Quality workloads: GSM8K subset, authored tasks with checkers, long-context retrieval, synthetic images.

Each module turns its items into prompts and scores an answer into the fields of one answers row; a run
stores item ids and scored answers, never prompt or question texts.
"""

SUITES = ("gsm8k", "authored", "retrieval", "image")
MODES = ("plain", "low-thinking")
