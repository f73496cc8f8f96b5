"""Real servers that tests start on loopback addresses (AIStore ``aisnode`` and ``authn``)."""
