"""MirrorMaker 2 and the failover to dc2."""
