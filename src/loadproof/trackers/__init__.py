"""Runs sent to the trackers users keep: MLflow, OpenTelemetry (GenAI conventions), llm-d's benchmark report."""
