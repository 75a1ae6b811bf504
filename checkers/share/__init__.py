"""Share groups (KIP-932): deliveries, acknowledgements and leader tenures."""
