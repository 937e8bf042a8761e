-- TPC-DS Q89, from duckdb 1.5.5 tpcds_queries(), translated duckdb -> spark by sqlglot 30.31.0
SELECT
  *
FROM (
  SELECT
    i_category,
    i_class,
    i_brand,
    s_store_name,
    s_company_name,
    d_moy,
    SUM(ss_sales_price) AS sum_sales,
    AVG(SUM(ss_sales_price)) OVER (PARTITION BY i_category, i_brand, s_store_name, s_company_name) AS avg_monthly_sales
  FROM item, store_sales, date_dim, store
  WHERE
    ss_item_sk = i_item_sk
    AND ss_sold_date_sk = d_date_sk
    AND ss_store_sk = s_store_sk
    AND d_year = 1999
    AND (
      (
        i_category IN ('Books', 'Electronics', 'Sports')
        AND i_class IN ('computers', 'stereo', 'football')
      )
      OR (
        i_category IN ('Men', 'Jewelry', 'Women')
        AND i_class IN ('shirts', 'birdal', 'dresses')
      )
    )
  GROUP BY
    i_category,
    i_class,
    i_brand,
    s_store_name,
    s_company_name,
    d_moy
) AS tmp1
WHERE
  CASE
    WHEN (
      avg_monthly_sales <> 0
    )
    THEN (
      ABS(sum_sales - avg_monthly_sales) / avg_monthly_sales
    )
    ELSE NULL
  END > 0.1
ORDER BY
  sum_sales - avg_monthly_sales NULLS LAST,
  s_store_name NULLS LAST,
  1 NULLS LAST,
  2 NULLS LAST,
  3 NULLS LAST,
  5 NULLS LAST,
  6 NULLS LAST,
  7 NULLS LAST,
  8 NULLS LAST
LIMIT 100
