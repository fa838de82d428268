"""The job runner: the process that holds the SparkSession (web requests never do)."""
