"""pipeline/least_privilege."""
