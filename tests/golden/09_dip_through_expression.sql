-- the derived table shifts the key by one and the join shifts the other side to match: the diP from the
-- 2020 orders is mapped through both expressions and still prunes items below the GROUP BY
SELECT o.id, t.total
FROM orders o
JOIN (SELECT order_id + 1 AS next_id, sum(qty) AS total FROM items GROUP BY order_id) t ON t.next_id = o.id + 1
WHERE o.day < DATE '2021-01-01'
