SELECT *
FROM orders o
LEFT JOIN items i ON o.id = i.order_id AND i.qty > 40
WHERE year(o.day) = 2020
