"""The seed_demo command."""
