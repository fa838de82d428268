"""The only modules of the web process that call the engine; they return plain view data."""
