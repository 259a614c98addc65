"""People who sign in: the custom user model."""
