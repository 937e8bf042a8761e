-- TPC-H Q06, from duckdb 1.5.5 tpch_queries(), translated duckdb -> spark by sqlglot 30.31.0
SELECT
  SUM(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE
  l_shipdate >= CAST('1994-01-01' AS DATE)
  AND l_shipdate < CAST('1995-01-01' AS DATE)
  AND l_discount BETWEEN 0.05 AND 0.07
  AND l_quantity < 24
