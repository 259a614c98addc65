"""Who changed which team, membership or queue, when, from what to what."""
