"""The planner: what a deployment should hold, in theory, before anything is measured."""
