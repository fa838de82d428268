"""What a running Spark job needs below the layers that start one: job groups and cancellation
(`jobs`), and turning a failed task's error back into the engine's typed error (`errors`). No
SparkSession is built here (`engine.spark.session` is the only place)."""
