"""Teams and their members' roles."""
