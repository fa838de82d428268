"""`make demo` (`python -m engine.demo`): a guided walk through a trips table for newcomers.

`trips` holds the dataset (pure), `links` the console pages each step points at (pure), `tour`
runs the steps on Spark, `console` registers the table in the admin console's database so those
pages exist, and `__main__` is the command line. Runs on the embedded defaults (local Spark,
./lakehouse, the console's SQLite) or on the lakehouse stack through its environment variables
(SPARK_MASTER, AWS_*, CONSOLE_WAREHOUSE_ROOTS, DATABASE_URL, CONSOLE_URL).
"""
