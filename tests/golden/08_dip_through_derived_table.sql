-- a diP from the 2020 orders goes sideways into the grouped derived table and below its GROUP BY key
SELECT o.id, t.total
FROM orders o
JOIN (SELECT order_id, sum(qty) AS total FROM items GROUP BY order_id) t ON t.order_id = o.id
WHERE o.day < DATE '2021-01-01'
