"""Multi-process tests under a real horovodrun (marked parallel + slow)."""
