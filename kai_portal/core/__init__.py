"""Shared plumbing only: environment parsing, custom fields, unit helpers."""
