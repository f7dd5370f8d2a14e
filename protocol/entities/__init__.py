"""What a decoded message names, found through the schema annotations: topics, ids, broker endpoints."""
