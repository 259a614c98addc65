"""Jobs (KAI pod groups) and their pods."""
