"""Configuration: the strict base model and the deployment Profile."""

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile, load_profile, packaged_profile

__all__ = ["Profile", "StrictModel", "load_profile", "packaged_profile"]
