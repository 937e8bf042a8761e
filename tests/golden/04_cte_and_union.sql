WITH recent AS (SELECT * FROM orders WHERE day > '2021-01-01')
SELECT id FROM recent
UNION ALL
SELECT order_id FROM items WHERE qty < 10
