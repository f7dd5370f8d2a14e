"""The audit-log pipeline: PySpark jobs that read ksgate's audit log (docs/audit-log.md).

``ksgate audit report|recommend|alerts|generate``; pyspark and matplotlib are the ``pipeline`` extra.
"""
