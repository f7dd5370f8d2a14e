"""The proxy session's state as small values: its phase, its gates and queues (h11's _state.py)."""
