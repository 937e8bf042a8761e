-- TPC-H Q20, from duckdb 1.5.5 tpch_queries(), translated duckdb -> spark by sqlglot 30.31.0
SELECT
  s_name,
  s_address
FROM supplier, nation
WHERE
  s_suppkey IN (
    SELECT
      ps_suppkey
    FROM partsupp
    WHERE
      ps_partkey IN (
        SELECT
          p_partkey
        FROM part
        WHERE
          p_name LIKE 'forest%'
      )
      AND ps_availqty > (
        SELECT
          0.5 * SUM(l_quantity)
        FROM lineitem
        WHERE
          l_partkey = ps_partkey
          AND l_suppkey = ps_suppkey
          AND l_shipdate >= CAST('1994-01-01' AS DATE)
          AND l_shipdate < CAST('1995-01-01' AS DATE)
      )
  )
  AND s_nationkey = n_nationkey
  AND n_name = 'CANADA'
ORDER BY
  s_name NULLS LAST
