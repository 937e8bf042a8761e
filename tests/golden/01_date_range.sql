SELECT o.id, o.status
FROM orders o   -- the fact table
WHERE o.day BETWEEN DATE '2021-01-01' AND DATE '2021-12-31'
