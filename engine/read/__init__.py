"""Reads on Spark: snapshot, time travel, incremental, over file slices."""
