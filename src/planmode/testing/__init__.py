"""Test helpers that ship with planmode (a scripted OpenAI-compatible server)."""
