"""Spark glue: the only place a SparkSession is built (`build_session`), and the engine's Spark
data source (`register`: `spark.read.format("hudi")`, `df.write.format("hudi")`, `USING hudi`)."""

from engine.spark.datasource import last_write, register
from engine.spark.session import build_session, ship_engine

__all__ = ["build_session", "last_write", "register", "ship_engine"]
