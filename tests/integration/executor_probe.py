"""Submitted in the job's place with the job's spark-submit line: where each Python runs and imports from.

Prints one JSON line: the driver's and every task's `sys.executable` and the files of the
`streaming` and `pyspark` packages they imported.
"""

import json
import sys

from pyspark.sql import SparkSession


def where_this_python_is(_rows=None):
    """The interpreter and the imported packages' files of the process running this."""
    import pyspark
    import streaming

    yield {"executable": sys.executable, "streaming": streaming.__file__, "pyspark": pyspark.__file__}


if __name__ == "__main__":
    tasks = int(sys.argv[1])
    spark = SparkSession.builder.appName("eosbench-executor-probe").getOrCreate()
    reports = spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(where_this_python_is).collect()
    print(json.dumps({"driver": next(where_this_python_is()), "tasks": reports}))
    spark.stop()
