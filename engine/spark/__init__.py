"""Spark glue: the only place a SparkSession is built (`build_session`)."""

from engine.spark.session import build_session, ship_engine

__all__ = ["build_session", "ship_engine"]
