"""Telemetry: samples of the engine's own metrics (and, later, GPU and host) taken during a run."""
