"""warren's history recording and analysis.

Recording (`schema`, `recorder`, `client_ops`, `compact`) imports pyarrow only, so
runtime processes can install a recorder without paying for Spark. The checks,
metrics and report (`spark`, `load`, `checks`, `metrics`, `report`) run after a run
on PySpark; `reference` re-implements every check in plain Python as their oracle.
"""
