"""loadproof: verified capacity, honest comparison and checkable publication for self-hosted LLMs."""

__version__ = "0.1.0"
