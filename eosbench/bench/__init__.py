"""Every benchmark (produce, writes, streaming, spark, sweep) with the results table, the report and the plots."""
